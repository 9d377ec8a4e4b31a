"""The REST API (FastAPI), versioned under /v1; OpenAPI at /docs.

Every /v1 route needs an API key (`Authorization: Bearer <key>` or `X-API-Key`). A key sees only its own
uploads and analyses: anything else answers 404, exactly as if it did not exist.
"""

# No `from __future__ import annotations`: FastAPI resolves the route annotations (they use the local
# `Owner` dependency alias) at definition time.
import asyncio
import contextlib
import json
import logging
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Annotated, Any, Literal

import numpy as np
import pyarrow.parquet as pq
from fastapi import APIRouter, Body, Depends, FastAPI, File, Form, Header, HTTPException, Query, UploadFile
from fastapi.responses import FileResponse, JSONResponse, Response
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from sqlalchemy import select, text

from cg_ray.artifacts.publish import atomic_file
from cg_ray.labels import ConceptLabels
from cg_ray.serve import readable, results
from cg_ray.serve.analyses import run_analysis
from cg_ray.serve.db import ACTIVE_STATUSES, Analysis, Store, Upload, new_id
from cg_ray.serve.encoding import Encoder
from cg_ray.serve.keys import verify_key
from cg_ray.serve.settings import ServiceSettings
from cg_ray.serve.uploads import FieldMapping, UploadError, parse_file, parse_rows

log = logging.getLogger(__name__)


class JsonUpload(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str = Field("rows", max_length=200)
    rows: list[dict[str, Any]]
    mapping: FieldMapping = FieldMapping()


class AnalysisRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    upload_ids: list[str] = Field(min_length=1)
    mode: Literal["precomputed", "generate", "arena"] = "precomputed"
    text: Literal["prompt", "response", "both"] = "both"
    scorer: str | None = Field(None, description="generate mode: how answers are scored (default exact)")
    model: str | None = Field(None, description="name of the evaluated model, for the record")
    metrics: dict[str, Any] = Field(default_factory=dict, description="cg_ray.config.MetricsConfig options")
    models: list[str] | None = Field(None, description="arena: models of interest (default: all with min_battles)")
    min_battles: int | None = Field(None, ge=1, description="arena: models with at least this many battles")
    max_battles_per_model: int | None = Field(None, ge=1, description="arena: read only the first N battles")


class ScoreRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    texts: list[str] = Field(min_length=1)
    scores: list[float | None] | None = None
    top_k: int = Field(5, ge=1, le=50)


class ProfileEntry(BaseModel):
    """One entry of a weakness profile (see README, run directory: weaknesses.parquet)."""

    rank: int
    concept_id: int
    label: str | None
    description: str | None
    X_model: float | None
    X_model_low: float | None
    X_model_high: float | None
    adjusted_gap: float | None
    adjusted_gap_low: float | None
    adjusted_gap_high: float | None
    n_rows: int
    n_eff: float | None
    n_benchmarks: int
    group: int
    members: list[int]
    metadata_enrichment: list[str]
    example_row_ids: list[str]


class ProfileResponse(BaseModel):
    kind: Literal["weaknesses", "strengths", "coverage_gaps"]
    rank_by: str | None
    duplicate_jaccard: float | None
    confidence: float | None
    total: int
    items: list[ProfileEntry]


def upload_view(u: Upload) -> dict[str, Any]:
    return {
        "id": u.id,
        "name": u.name,
        "n_rows": u.n_rows,
        "benchmarks": u.benchmarks,
        "fields": u.fields,
        "has_scores": u.has_scores,
        "created_at": u.created_at.isoformat(),
    }


def analysis_view(a: Analysis) -> dict[str, Any]:
    return {
        "id": a.id,
        "upload_ids": a.upload_ids,
        "mode": a.mode,
        "status": a.status,
        "progress": round(a.progress, 4),
        "message": a.message,
        "error": a.error,
        "job_id": a.job_id,
        "created_at": a.created_at.isoformat(),
        "updated_at": a.updated_at.isoformat(),
    }


def create_api(settings: ServiceSettings, store: Store, encoder: Encoder, labels: ConceptLabels | None) -> FastAPI:
    settings.uploads_dir.mkdir(parents=True, exist_ok=True)
    settings.analyses_dir.mkdir(parents=True, exist_ok=True)
    tasks: set[asyncio.Task[None]] = set()

    @contextlib.asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        # Analyses that were queued or running when the service stopped are run again: nothing is lost.
        with store.session() as s:
            pending = [
                a.id
                for a in s.scalars(
                    select(Analysis).where(Analysis.status.in_(ACTIVE_STATUSES), Analysis.job_id.is_(None))
                )
            ]
        for analysis_id in pending:
            log.info("resuming analysis %s after a restart", analysis_id)
            start(analysis_id)
        yield
        for task in list(tasks):
            task.cancel()

    app = FastAPI(
        title="cg_ray",
        version="1",
        description="Competency gaps of models and benchmarks, over REST.",
        lifespan=lifespan,
    )

    def start(analysis_id: str) -> None:
        task = asyncio.get_running_loop().create_task(
            run_analysis(store, encoder, analysis_id, settings.analyses_dir, labels)
        )
        tasks.add(task)
        task.add_done_callback(tasks.discard)

    def require_key(
        authorization: Annotated[str | None, Header()] = None,
        x_api_key: Annotated[str | None, Header()] = None,
    ) -> str:
        key = x_api_key or (authorization[7:] if authorization and authorization.startswith("Bearer ") else None)
        owner = verify_key(store, key) if key else None
        if owner is None:
            raise HTTPException(401, "missing or invalid API key", headers={"WWW-Authenticate": "Bearer"})
        return owner

    Owner = Annotated[str, Depends(require_key)]

    def owned(model: type[Upload] | type[Analysis], owner: str, item_id: str) -> Any:
        """The caller's own row, or 404 — the same answer whether it is someone else's or does not exist."""
        row = store.get_owned(model, owner, item_id)
        if row is None:
            raise HTTPException(404, f"no {model.__tablename__.rstrip('s')} {item_id!r}")
        return row

    def current(owner: str, analysis_id: str) -> Any:
        a = owned(Analysis, owner, analysis_id)
        if a.job_id and a.status in ACTIVE_STATUSES:
            from cg_ray.serve.jobs import refresh

            refresh(settings, store, a)
            a = owned(Analysis, owner, analysis_id)
        return a

    def finished(owner: str, analysis_id: str) -> str:
        a = current(owner, analysis_id)
        if a.status != "succeeded" or not a.run_dir:
            raise HTTPException(409, f"analysis {analysis_id!r} is {a.status}, no results yet")
        return str(a.run_dir)

    @app.get("/healthz", tags=["ops"])
    def healthz() -> dict[str, str]:
        return {"status": "ok"}

    @app.get("/readyz", tags=["ops"])
    def readyz() -> JSONResponse:
        try:
            with store.session() as s:
                s.execute(text("SELECT 1"))
        except Exception as exc:  # the database is the one dependency we can check cheaply
            return JSONResponse({"status": "not ready", "error": str(exc)}, status_code=503)
        return JSONResponse({"status": "ready", "d_sae": encoder.d_sae})

    v1 = APIRouter(prefix="/v1")

    def store_upload(owner: str, name: str, parsed: Any, mapping: FieldMapping) -> dict[str, Any]:
        upload_id = new_id("upl")
        path = settings.uploads_dir / f"{upload_id}.parquet"
        with atomic_file(path) as tmp:
            pq.write_table(parsed.table, tmp)
        try:
            with store.session() as s:
                row = Upload(
                    id=upload_id,
                    owner=owner,
                    name=name,
                    n_rows=parsed.table.num_rows,
                    benchmarks=parsed.benchmarks,
                    fields={"detected": parsed.detected_fields, "mapping": mapping.model_dump()},
                    has_scores=parsed.has_scores,
                    path=str(path),
                )
                s.add(row)
        except Exception:
            path.unlink(missing_ok=True)  # no orphan file without its metadata row
            raise
        return upload_view(row)

    @v1.post("/uploads", status_code=201, tags=["uploads"])
    async def upload_file(
        owner: Owner,
        file: Annotated[UploadFile, File(description="JSONL, CSV or Parquet")],
        benchmark: Annotated[str | None, Form()] = None,
        mapping: Annotated[
            str | None, Form(description="JSON object: {id, benchmark, prompt, response, reference, score}")
        ] = None,
    ) -> dict[str, Any]:
        try:
            field_mapping = FieldMapping.model_validate_json(mapping) if mapping else FieldMapping()
        except ValidationError as exc:
            raise HTTPException(422, f"invalid mapping: {exc.errors()[0]['msg']}") from None
        limit = settings.limits.max_upload_bytes
        data = await file.read(limit + 1)
        name = file.filename or "upload"
        try:
            if len(data) > limit:
                raise UploadError(413, f"upload is over the {limit:,}-byte limit")
            parsed = parse_file(
                data, name, file.content_type, field_mapping, benchmark or Path(name).stem, settings.limits
            )
        except UploadError as exc:
            raise HTTPException(exc.status, exc.detail()) from None
        return store_upload(owner, name, parsed, field_mapping)

    @v1.post("/uploads/json", status_code=201, tags=["uploads"])
    def upload_json(owner: Owner, body: JsonUpload) -> dict[str, Any]:
        try:
            parsed = parse_rows(body.rows, body.mapping, body.name, settings.limits)
        except UploadError as exc:
            raise HTTPException(exc.status, exc.detail()) from None
        return store_upload(owner, body.name, parsed, body.mapping)

    @v1.post("/battles", status_code=201, tags=["uploads"])
    async def upload_battles(
        owner: Owner, file: Annotated[UploadFile, File(description="battles in the LMSYS layout: JSONL or Parquet")]
    ) -> dict[str, Any]:
        from cg_ray.serve.battles import validate_battles

        limit = settings.limits.max_upload_bytes
        data = await file.read(limit + 1)
        if len(data) > limit:
            raise HTTPException(413, {"error": f"upload is over the {limit:,}-byte limit", "line": None, "field": None})
        upload_id = new_id("upl")
        try:
            path, summary = await asyncio.to_thread(
                validate_battles, data, file.filename or "battles.jsonl", settings.uploads_dir, upload_id
            )
        except UploadError as exc:
            raise HTTPException(exc.status, exc.detail()) from None
        try:
            with store.session() as s:
                row = Upload(
                    id=upload_id,
                    owner=owner,
                    name=file.filename or "battles",
                    n_rows=summary["n_battles"],
                    benchmarks=summary["models"],
                    fields={"kind": "battles", **summary},
                    has_scores=True,
                    path=str(path),
                )
                s.add(row)
        except Exception:
            path.unlink(missing_ok=True)
            raise
        return upload_view(row)

    @v1.get("/analyses/{analysis_id}/arena", tags=["results"])
    def get_arena(owner: Owner, analysis_id: str) -> dict[str, Any]:
        run_dir = Path(finished(owner, analysis_id))
        a = owned(Analysis, owner, analysis_id)
        if a.mode != "arena":
            raise HTTPException(404, f"analysis {analysis_id!r} is not an arena analysis")
        ratings = json.loads((run_dir / "ratings" / "ratings.json").read_text(encoding="utf-8"))
        h2h = json.loads((run_dir / "head_to_head.json").read_text(encoding="utf-8"))
        return {
            "ratings": ratings["models"],
            "model_analyses": a.options.get("model_analyses", {}),
            "model_concepts": h2h.get("model_concepts", []),
            "pairs": h2h.get("pairs", []),
        }

    @v1.get("/uploads", tags=["uploads"])
    def list_uploads(owner: Owner) -> list[dict[str, Any]]:
        return [upload_view(u) for u in store.list_owned(Upload, owner)]

    @v1.get("/uploads/{upload_id}", tags=["uploads"])
    def get_upload(owner: Owner, upload_id: str) -> dict[str, Any]:
        return upload_view(owned(Upload, owner, upload_id))

    @v1.post("/analyses", status_code=202, tags=["analyses"])
    async def create_analysis(owner: Owner, body: AnalysisRequest) -> dict[str, Any]:
        uploads = [owned(Upload, owner, upload_id) for upload_id in body.upload_ids]
        battles = [u for u in uploads if u.fields.get("kind") == "battles"]
        if body.mode == "arena" and (len(uploads) != 1 or not battles):
            raise HTTPException(422, "mode 'arena' takes exactly one battles upload (POST /v1/battles)")
        if body.mode != "arena" and battles:
            raise HTTPException(422, f"upload {battles[0].id!r} holds battles: use mode 'arena'")
        as_job = body.mode in ("generate", "arena") or sum(u.n_rows for u in uploads) > settings.small_analysis_rows
        if body.scorer is not None:
            from cg_ray.scoring import SCORERS

            try:
                SCORERS.check(body.scorer)
            except Exception as exc:
                raise HTTPException(422, f"invalid scorer: {exc}") from None
        try:
            from cg_ray.config import MetricsConfig

            MetricsConfig(**body.metrics)
        except (ValidationError, TypeError) as exc:
            raise HTTPException(422, f"invalid metrics options: {exc}") from None
        active = [a for a in store.list_owned(Analysis, owner) if a.status in ACTIVE_STATUSES]
        if len(active) >= settings.limits.max_concurrent_analyses:
            raise HTTPException(429, f"{len(active)} analyses already running for this key; wait for one to finish")
        analysis_id = new_id("ana")
        with store.session() as s:
            row = Analysis(
                id=analysis_id,
                owner=owner,
                upload_ids=body.upload_ids,
                mode=body.mode,
                options=body.model_dump(exclude={"upload_ids", "mode"}),
            )
            s.add(row)
        if as_job:
            from cg_ray.serve.jobs import submit

            try:
                await asyncio.to_thread(submit, settings, store, analysis_id)
            except Exception as exc:  # no cluster to submit to: the analysis fails visibly, not the service
                store.update_analysis(analysis_id, status="failed", error=f"cannot submit the Ray job: {exc}")
            return analysis_view(owned(Analysis, owner, analysis_id))
        start(analysis_id)
        return analysis_view(row)

    @v1.get("/analyses", tags=["analyses"])
    def list_analyses(owner: Owner) -> list[dict[str, Any]]:
        return [analysis_view(a) for a in store.list_owned(Analysis, owner)]

    @v1.get("/analyses/{analysis_id}", tags=["analyses"])
    def get_analysis(owner: Owner, analysis_id: str) -> dict[str, Any]:
        return analysis_view(current(owner, analysis_id))

    @v1.get("/analyses/{analysis_id}/summary", tags=["results"])
    def get_summary(owner: Owner, analysis_id: str) -> dict[str, Any]:
        return results.summary(finished(owner, analysis_id))

    @v1.get("/analyses/{analysis_id}/concepts", tags=["results"])
    def get_concepts(
        owner: Owner,
        analysis_id: str,
        sort: results.SortKey = "X_model",
        order: Literal["asc", "desc"] = "asc",
        coverage_class: Annotated[Literal["missing", "under", "normal", "over"] | None, Query(alias="class")] = None,
        benchmark: str | None = None,
        q: Annotated[str | None, Query(max_length=200)] = None,
        model_gaps_only: bool = False,
        scored_only: bool = False,
        limit: Annotated[int, Query(ge=1, le=1000)] = 50,
        offset: Annotated[int, Query(ge=0)] = 0,
    ) -> dict[str, Any]:
        return results.concept_table(
            finished(owner, analysis_id),
            sort=sort,
            order=order,
            coverage_class=coverage_class,
            benchmark=benchmark,
            q=q,
            model_gaps_only=model_gaps_only,
            scored_only=scored_only,
            limit=limit,
            offset=offset,
        )

    @v1.get("/analyses/{analysis_id}/weaknesses", tags=["results"], response_model=ProfileResponse)
    def get_weaknesses(
        owner: Owner,
        analysis_id: str,
        kind: results.ProfileKind = "weaknesses",
        limit: Annotated[int, Query(ge=1, le=1000)] = 50,
    ) -> dict[str, Any]:
        """The weakness profile (or strengths / coverage gaps) in rank order, with intervals and groups."""
        out = results.profile(finished(owner, analysis_id), kind, limit)
        if out is None:
            raise HTTPException(404, f"analysis {analysis_id!r} has no {kind} profile (made by an older version)")
        return out

    @v1.get("/analyses/{analysis_id}/concepts/{concept_id}", tags=["results"])
    def get_concept(owner: Owner, analysis_id: str, concept_id: int) -> dict[str, Any]:
        detail = results.concept_detail(finished(owner, analysis_id), concept_id)
        if detail is None:
            raise HTTPException(404, f"no concept {concept_id}")
        detail["readable"] = readable.concept_description(finished(owner, analysis_id), concept_id)
        return detail

    @v1.get("/analyses/{analysis_id}/themes", tags=["results"])
    def get_themes(owner: Owner, analysis_id: str) -> dict[str, Any]:
        """Themes of the analysis's weak / under-covered concepts (`cg-ray describe`), same isolation."""
        found = readable.themes(finished(owner, analysis_id))
        if found is None:
            raise HTTPException(404, "this analysis has no themes (cg-ray describe has not run on it)")
        return found

    @v1.get("/analyses/{analysis_id}/distributions", tags=["results"])
    def get_distributions(owner: Owner, analysis_id: str) -> dict[str, Any]:
        return results.distributions(finished(owner, analysis_id))

    @v1.get("/analyses/{analysis_id}/coverage", tags=["results"])
    def get_subset_coverage(
        owner: Owner, analysis_id: str, benchmarks: Annotated[list[str], Query(min_length=1)]
    ) -> dict[str, Any]:
        out = results.subset_coverage(finished(owner, analysis_id), benchmarks)
        if out is None:
            raise HTTPException(422, f"unknown benchmark in {benchmarks}")
        return out

    @v1.get("/analyses/{analysis_id}/artifacts/{name}", tags=["results"])
    def get_artifact(owner: Owner, analysis_id: str, name: str) -> Response:
        run_dir = Path(finished(owner, analysis_id))
        source = results.DOWNLOADS.get(name)  # a fixed list: a client never names a server path
        if source is None:
            raise HTTPException(404, f"no artifact {name!r}; available: {sorted(results.DOWNLOADS)}")
        if name.endswith(".csv") and source.endswith(".parquet"):
            import io

            import pyarrow.csv as pacsv

            buf = io.BytesIO()
            pacsv.write_csv(pq.read_table(run_dir / source), buf)
            return Response(
                buf.getvalue(), media_type="text/csv", headers={"Content-Disposition": f'attachment; filename="{name}"'}
            )
        return FileResponse(run_dir / source, filename=name)

    @v1.post("/score", tags=["score"])
    async def score(owner: Owner, body: Annotated[ScoreRequest, Body()]) -> dict[str, Any]:
        del owner
        n = len(body.texts)
        if n > settings.limits.max_score_rows:
            raise HTTPException(413, f"{n} texts, over the {settings.limits.max_score_rows}-row limit of /v1/score")
        if body.scores is not None:
            if len(body.scores) != n:
                raise HTTPException(422, f"{len(body.scores)} scores for {n} texts")
            for i, s in enumerate(body.scores):
                if s is not None and not 0.0 <= s <= 1.0:
                    raise HTTPException(422, {"error": f"score {s} is outside [0, 1]", "row": i, "field": "scores"})
        max_chars = settings.limits.max_tokens_per_row * 8
        for i, row_text in enumerate(body.texts):
            if not row_text.strip():
                raise HTTPException(422, {"error": "empty text", "row": i, "field": "texts"})
            if len(row_text) > max_chars:
                raise HTTPException(413, {"error": "text over the token limit", "row": i, "field": "texts"})
        encoded = await encoder.encode(body.texts)
        return score_batch(encoded, body.scores, body.top_k, encoder.d_sae, labels)

    app.include_router(v1)
    mount_ui(app)
    return app


UI_DIR = Path(__file__).with_name("ui")


def mount_ui(app: FastAPI) -> None:
    """The web explorer at /ui; plotly.js comes from the installed plotly package (no CDN, works offline)."""
    import plotly
    from fastapi.staticfiles import StaticFiles

    plotly_js = Path(plotly.__file__).with_name("package_data") / "plotly.min.js"

    @app.get("/ui/plotly.min.js", include_in_schema=False)
    def plotly_bundle() -> FileResponse:
        return FileResponse(plotly_js, media_type="text/javascript")

    @app.get("/", include_in_schema=False)
    def root() -> Response:
        return Response(status_code=307, headers={"Location": "/ui/"})

    app.mount("/ui", StaticFiles(directory=UI_DIR, html=True), name="ui")


def score_batch(
    encoded: list[Any], scores: list[float | None] | None, top_k: int, d_sae: int, labels: ConceptLabels | None
) -> dict[str, Any]:
    """Per-row top concepts, and the batch's χ_bench / χ_model over its own rows (one 'benchmark')."""
    from cg_ray.metrics.accumulator import CGAccumulator
    from cg_ray.metrics.compute import compute_metrics

    def label(c: int) -> str | None:
        return labels.get(c) if labels else None

    rows = []
    for e in encoded:
        order = np.argsort(-e.concept_acts, kind="stable")[:top_k]
        rows.append(
            {
                "n_tokens": int(e.n_tokens),
                "top_concepts": [
                    {
                        "concept_id": int(e.concept_ids[i]),
                        "label": label(int(e.concept_ids[i])),
                        "activation": float(e.concept_acts[i]),
                    }
                    for i in order
                ],
            }
        )
    acc = CGAccumulator(d_sae)
    lengths = [len(e.concept_ids) for e in encoded]
    acc.add_batch(
        np.zeros(len(encoded), dtype=np.int32),
        ["batch"],
        np.array([np.nan if s is None else s for s in (scores or [None] * len(encoded))], dtype=np.float64),
        np.concatenate([[0], np.cumsum(lengths)]),
        np.concatenate([e.concept_ids for e in encoded]).astype(np.int32),
        np.concatenate([e.concept_acts for e in encoded]).astype(np.float32),
    )
    result = compute_metrics(acc)
    chi_b = result.chi_bench[0]
    covered = np.argsort(-chi_b, kind="stable")[:top_k]
    summary: dict[str, Any] = {
        "n_rows": len(encoded),
        "n_active_concepts": int((chi_b > 0).sum()),
        "most_covered": [
            {"concept_id": int(c), "label": label(int(c)), "chi_bench": float(chi_b[c])}
            for c in covered
            if chi_b[c] > 0
        ],
    }
    if scores is not None and any(s is not None for s in scores):
        chi_m = result.chi_model[0]
        defined = np.flatnonzero(~np.isnan(chi_m))
        ranked = defined[np.lexsort((-result.act_sum[0][defined], chi_m[defined]))][:top_k]
        summary["lowest_chi_model"] = [
            {"concept_id": int(c), "label": label(int(c)), "chi_model": float(chi_m[c]), "chi_bench": float(chi_b[c])}
            for c in ranked
        ]
    return {"rows": rows, "summary": summary}
