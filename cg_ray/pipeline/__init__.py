"""The CG run as a Ray Data job: load → (generate → score) → read activations → aggregate → publish."""
