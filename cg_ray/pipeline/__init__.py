"""The main job: builds and runs the Ray Data graph (load → generate → score → read → aggregate → publish)."""
