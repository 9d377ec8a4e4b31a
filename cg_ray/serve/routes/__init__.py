"""One FastAPI router per resource; `cg_ray.serve.api.create_api` includes them all."""
