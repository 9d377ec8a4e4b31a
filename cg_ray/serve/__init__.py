"""The REST service: FastAPI ingress + encoder deployment on Ray Serve, SQL metadata, web explorer."""
