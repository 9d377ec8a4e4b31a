"""One other reader's run: the run's rows re-read by that reader (the reading step only: scores, metadata and
row ids are the run's) through the pipeline's Ray Data reader pool, and judged again by `publish_metrics`
with the run's own settings and seeds, into `RunDir.sensitivity_reader(name)`, published atomically."""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from cg_ray import __version__
from cg_ray import schemas as S
from cg_ray.activations.config import DEFAULT_READER_FACTORY, ReaderConfig
from cg_ray.artifacts.layout import RunDir
from cg_ray.artifacts.publish import atomic_directory
from cg_ray.config import MetricsConfig
from cg_ray.describe.rundir import ReadSettings, row_text
from cg_ray.errors import InputError
from cg_ray.sensitivity.config import SensitivityConfig

log = logging.getLogger(__name__)

ACTIVATION_COLUMNS = (S.N_TOKENS, S.CONCEPT_IDS, S.CONCEPT_ACTS)
TEXT = "_text"


@dataclass(frozen=True)
class OtherRun:
    """A reader's run over the run's rows: where it is, how long the reading took, whether it was resumed."""

    name: str
    dir: RunDir
    sae: str
    layer: int | None
    d_sae: int
    seconds: float
    resumed: bool


def reader_config_for(settings: ReadSettings, sae: str) -> ReaderConfig:
    """The run's reader settings with another SAE (its layer taken from that SAE's hook)."""
    given = {k: v for k, v in settings.reader.items() if k in ReaderConfig.model_fields}
    return ReaderConfig.model_validate({**given, "sae": sae, "layer": None})


def texts_of(rows: pa.Table, settings: ReadSettings, run: RunDir, tokenizer: Any = None) -> list[str]:
    """Each row's text as the run's reader read it (prompt, response or both; the chat template if it used one)."""
    texts = []
    for i, record in enumerate(rows.select([c for c in ("prompt", "response") if c in rows.column_names]).to_pylist()):
        made = row_text(record, settings, tokenizer)
        if made is None:
            raise InputError(f"row {i} has no {settings.text} text to re-read", path=str(run.rows), field=settings.text)
        texts.append(made[0])
    return texts


def chat_tokenizer(settings: ReadSettings) -> Any:
    """The reader model's tokenizer, for runs read through its chat template (None otherwise)."""
    if not settings.chat_template:
        return None
    from transformers import AutoTokenizer

    from cg_ray.catalog import DEFAULT_MODEL, KNOWN_MODELS, prepare

    model = str(settings.reader.get("model") or DEFAULT_MODEL)
    return AutoTokenizer.from_pretrained(str(prepare(model) if model in KNOWN_MODELS else model))


def reread(
    run: RunDir,
    name: str,
    sae: str,
    settings: ReadSettings,
    metrics: MetricsConfig,
    model: str | None,
    config: SensitivityConfig,
) -> OtherRun:
    """Read the run's rows with reader `name` (SAE spec `sae`) and publish its run (rows, metrics, findings)."""
    from cg_ray.pipeline.reader_stage import ReadOptions
    from cg_ray.pipeline.reading import read_texts

    started = time.perf_counter()
    rows = pq.read_table(run.rows)
    if rows.num_rows == 0:
        raise InputError("has no rows to re-read", path=str(run.rows))
    table = rows.drop_columns([c for c in ACTIVATION_COLUMNS if c in rows.column_names])
    texts = texts_of(rows, settings, run, chat_tokenizer(settings))
    reader = reader_config_for(settings, sae)
    log.info("re-reading %s rows with reader %s (%s)", f"{rows.num_rows:,}", name, sae)
    # A chat template's text carries its own special tokens (row_text): the tokenizer must not add them again.
    options: ReadOptions = {"add_special_tokens": False} if settings.chat_template else {}
    read = read_texts(
        pa.table({TEXT: texts}), TEXT, reader, config.resources, config.reader_factory, read_options=options or None
    )
    d_sae = int(read["_d_sae"][0].as_py())
    actors = [json.loads(a) for a in sorted(set(read["_reader_actor"].to_pylist()))]
    read_by = ReadBy(name, sae, reader, d_sae, actors, time.perf_counter() - started)
    return publish_reader_run(run, with_activations(table, read, d_sae), read_by, settings, metrics, model, config)


@dataclass(frozen=True)
class ReadBy:
    """Who read a reader run's rows and how long it took."""

    name: str
    sae: str
    reader: ReaderConfig
    d_sae: int
    actors: list[dict[str, Any]]
    seconds: float


def publish_reader_run(
    run: RunDir,
    rows: pa.Table,
    read_by: ReadBy,
    settings: ReadSettings,
    metrics: MetricsConfig,
    model: str | None,
    config: SensitivityConfig,
) -> OtherRun:
    """Publish the reader's run of the run's rows (`rows`: the run's rows with that reader's activations):
    rows, a manifest naming the reader, and every metrics file, judged with the run's settings and seeds."""
    from cg_ray.run_outputs import publish_metrics

    target = run.sensitivity_reader(read_by.name)
    with atomic_directory(target.path, overwrite=True) as tmp:
        building = RunDir(tmp)
        building.write(S.ROWS_FILE, rows)
        building.write_json(S.MANIFEST_FILE, _manifest(run, read_by, settings, config))
        extra = {"sensitivity_of": str(run.path), "evaluated_model": model}
        labels = _labels(read_by.sae, read_by.d_sae, config)
        publish_metrics(building, metrics, labels, extra, model=model)
    log.info("reader %s: %s rows read and judged in %.1f s", read_by.name, f"{rows.num_rows:,}", read_by.seconds)
    layer = sae_layer(read_by.sae, config)
    return OtherRun(read_by.name, target, read_by.sae, layer, read_by.d_sae, read_by.seconds, resumed=False)


def with_activations(table: pa.Table, read: pa.Table, d_sae: int) -> pa.Table:
    """The run's rows with the other reader's n_tokens / concept ids / s̃, in the rows schema's order."""
    schema = S.rows_schema_with_d_sae(d_sae)
    columns = {f.name: (read[f.name] if f.name in ACTIVATION_COLUMNS else table[f.name]) for f in schema}
    rest = [c for c in table.column_names if c not in columns]
    out = pa.table(columns, schema=schema)
    for name in rest:
        out = out.append_column(table.schema.field(name), table[name])
    return out


def sae_layer(sae: str, config: SensitivityConfig) -> int | None:
    """The hook layer of a shipped reader (None for another SAE spec or a stand-in reader)."""
    from cg_ray.activations.saes.shipped import SHIPPED_READERS

    if config.reader_factory != DEFAULT_READER_FACTORY:
        return None
    shipped = SHIPPED_READERS.get(sae)
    return shipped.layer if shipped else None


def _labels(sae: str, d_sae: int, config: SensitivityConfig) -> Any:
    from cg_ray.activations.saes.labels import shipped_labels

    return shipped_labels(sae, d_sae, config.reader_factory)


def _manifest(run: RunDir, read_by: ReadBy, settings: ReadSettings, config: SensitivityConfig) -> dict[str, Any]:
    """A run manifest recording the reader (so its labels, `describe` and `read_run` know it)."""
    return {
        "cg_ray_version": __version__,
        "config": {"reader": {**read_by.reader.model_dump(mode="json"), "text": settings.text}},
        "reader": {"d_sae": read_by.d_sae, "factory": config.reader_factory, "actors": read_by.actors},
        "sensitivity": {"of": str(run.path), "reader": read_by.name, "chat_template": settings.chat_template},
        "seconds": round(read_by.seconds, 3),
    }
