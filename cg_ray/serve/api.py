"""The REST API (FastAPI), versioned under /v1; OpenAPI at /docs.

Every /v1 route needs an API key (`Authorization: Bearer <key>` or `X-API-Key`). A key sees only its own
uploads and analyses: anything else answers 404, exactly as if it did not exist. The routes live in
`cg_ray.serve.routes` (one router per resource); this module assembles the application.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from pathlib import Path

from fastapi import FastAPI
from fastapi.responses import Response

from cg_ray.labels import ConceptLabels
from cg_ray.serve.db import Store
from cg_ray.serve.deps import Service
from cg_ray.serve.edge import EdgeMiddleware
from cg_ray.serve.encoding import Encoder
from cg_ray.serve.errors import install_error_handlers
from cg_ray.serve.routes import (
    analyses,
    augment,
    diff,
    diff_models,
    ops,
    probe,
    results,
    scope,
    score,
    sensitivity,
    uploads,
)
from cg_ray.serve.settings import Limits, ServiceSettings

log = logging.getLogger(__name__)

UI_DIR = Path(__file__).with_name("ui")


def create_api(settings: ServiceSettings, store: Store, encoder: Encoder, labels: ConceptLabels | None) -> FastAPI:
    settings.uploads_dir.mkdir(parents=True, exist_ok=True)
    settings.analyses_dir.mkdir(parents=True, exist_ok=True)
    service = Service(settings, store, encoder, labels)

    @contextlib.asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        # Analyses queued or running when a replica stopped are claimed and run again (`leases.py`): by this
        # replica at once if their lease was released or has expired, else once it expires; nothing is lost.
        keeper = asyncio.get_running_loop().create_task(service.leases.keep(service.start_analysis))
        yield
        keeper.cancel()
        service.leases.stop()

    app = FastAPI(
        title="cg_ray",
        version="1",
        description="Competency gaps of models and benchmarks, over REST.",
        lifespan=lifespan,
    )
    app.state.service = service
    install_error_handlers(app)
    app.add_middleware(EdgeMiddleware, body_limit=lambda ctype: body_limit(settings.limits, ctype))
    for module in (ops, uploads, analyses, results, probe, augment, scope, sensitivity, diff, diff_models, score):
        app.include_router(module.router)
    mount_ui(app)
    return app


def body_limit(limits: Limits, content_type: str) -> int:
    """Multipart uploads get room for their envelope and form fields; any other body (JSON rows) the upload limit."""
    return limits.max_request_bytes if content_type.startswith("multipart/") else limits.max_upload_bytes


def mount_ui(app: FastAPI) -> None:
    """The web explorer at /ui: the app `cg-ray report` inlines, with its own SVG charts (no CDN, offline)."""
    from fastapi.staticfiles import StaticFiles

    @app.get("/", include_in_schema=False)
    def root() -> Response:
        return Response(status_code=307, headers={"Location": "/ui/"})

    app.mount("/ui", StaticFiles(directory=UI_DIR, html=True), name="ui")
