"""What the routes share, as FastAPI dependencies: the service (settings, store, encoder, labels), the
caller's API key, and the caller's own uploads and analyses.

A key sees only its own rows: anything else answers 404, exactly as if it did not exist.
"""

from __future__ import annotations

import asyncio
import dataclasses
from pathlib import Path
from typing import Annotated, TypeVar

from fastapi import Depends, Header, Request

from cg_ray.artifacts.layout import ArenaDir, ModelDiffDir, RunDir
from cg_ray.labels import ConceptLabels
from cg_ray.serve.analyses import Offload, in_thread, run_analysis
from cg_ray.serve.db import ACTIVE_STATUSES, Analysis, Store, Upload
from cg_ray.serve.encoding import Encoder
from cg_ray.serve.errors import api_error
from cg_ray.serve.keys import verify_key
from cg_ray.serve.leases import LeaseKeeper
from cg_ray.serve.model_diffs import MODE as DIFF_MODELS
from cg_ray.serve.model_diffs import run_diff_models
from cg_ray.serve.settings import ServiceSettings

Owned = TypeVar("Owned", Upload, Analysis)


@dataclasses.dataclass
class Service:
    settings: ServiceSettings
    store: Store
    encoder: Encoder
    labels: ConceptLabels | None
    leases: LeaseKeeper = None  # type: ignore[assignment]  # this replica's leases; made from the store if None
    offload: Offload = in_thread  # where analyses' metrics run; Ray Serve's ingress: Ray tasks (analyses.RayTasks)

    def __post_init__(self) -> None:
        if self.leases is None:
            self.leases = LeaseKeeper(self.store)

    @property
    def tasks(self) -> dict[str, asyncio.Task[None]]:
        """The analyses this replica runs, by id (cancel and shutdown stop them)."""
        return self.leases.held

    def start_analysis(self, analysis_id: str) -> None:
        """Run an in-service analysis in the background if this replica wins its lease (with several ingress
        replicas on one store, exactly one runs it)."""
        analysis = self.store.get_owned_any(Analysis, analysis_id)
        if analysis is not None and analysis.mode == DIFF_MODELS:
            work = run_diff_models(self.store, self.encoder, analysis_id, self.settings, self.labels)
        else:
            work = run_analysis(
                self.store,
                self.encoder,
                analysis_id,
                self.settings.analyses_dir,
                self.labels,
                self.offload,
                reader=self.settings.reader,
            )
        self.leases.start(analysis_id, work)

    def owned(self, model: type[Owned], owner: str, item_id: str) -> Owned:
        """The caller's own row, or 404 — the same answer whether it is someone else's or does not exist."""
        row: Owned | None = self.store.get_owned(model, owner, item_id)
        if row is None:
            raise api_error(404, f"no {model.__tablename__.rstrip('s')} {item_id!r}")
        return row

    def current(self, owner: str, analysis_id: str) -> Analysis:
        """The analysis, its status first brought up to date when a Ray job runs it."""
        analysis = self.owned(Analysis, owner, analysis_id)
        if analysis.job_id and analysis.status in ACTIVE_STATUSES:
            from cg_ray.serve.jobs import refresh

            refresh(self.settings, self.store, analysis)
            analysis = self.owned(Analysis, owner, analysis_id)
        return analysis


def get_service(request: Request) -> Service:
    service: Service = request.app.state.service
    return service


ServiceDep = Annotated[Service, Depends(get_service)]


def require_key(
    service: ServiceDep,
    authorization: Annotated[str | None, Header()] = None,
    x_api_key: Annotated[str | None, Header()] = None,
) -> str:
    key = x_api_key or (authorization[7:] if authorization and authorization.startswith("Bearer ") else None)
    owner = verify_key(service.store, key) if key else None
    if owner is None:
        raise api_error(401, "missing or invalid API key", headers={"WWW-Authenticate": "Bearer"})
    return owner


Owner = Annotated[str, Depends(require_key)]


def finished_run(service: ServiceDep, owner: Owner, analysis_id: str) -> RunDir:
    """The run directory of the caller's succeeded analysis `analysis_id` (a path parameter), else 404/409."""
    analysis = service.current(owner, analysis_id)
    if analysis.mode == DIFF_MODELS:
        raise api_error(409, f"analysis {analysis_id!r} is a diff-models analysis: GET /v1/diff-models/{analysis_id}")
    return RunDir(succeeded_folder(analysis))


def succeeded_folder(analysis: Analysis) -> Path:
    """The analysis' published folder, or 409 while it has none."""
    if analysis.status != "succeeded" or not analysis.run_dir:
        raise api_error(409, f"analysis {analysis.id!r} is {analysis.status}, no results yet")
    return Path(analysis.run_dir)


def finished_diff_models(service: ServiceDep, owner: Owner, analysis_id: str) -> ModelDiffDir:
    """The folder of the caller's succeeded diff-models analysis `analysis_id`, else 404 / 409."""
    analysis = service.current(owner, analysis_id)
    if analysis.mode != DIFF_MODELS:
        raise api_error(404, f"no diff-models analysis {analysis_id!r} (it is a {analysis.mode} analysis)")
    return ModelDiffDir(succeeded_folder(analysis))


def finished_arena(service: ServiceDep, owner: Owner, analysis_id: str) -> ArenaDir:
    """The arena directory of the caller's succeeded arena analysis `analysis_id`, else 404 / 409."""
    analysis = service.current(owner, analysis_id)
    folder = succeeded_folder(analysis)
    if analysis.mode != "arena":
        raise api_error(404, f"analysis {analysis_id!r} is not an arena analysis")
    return ArenaDir(folder)


# The routes get the folder as its layout (cg_ray.artifacts.layout), wrapped here once.
FinishedRun = Annotated[RunDir, Depends(finished_run)]
FinishedDiffModels = Annotated[ModelDiffDir, Depends(finished_diff_models)]
FinishedArena = Annotated[ArenaDir, Depends(finished_arena)]
