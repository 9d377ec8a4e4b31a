"""Typed benchmark sources: what the `benchmarks:` list of a run configuration holds.

A discriminated union on ``kind``; each kind has one loader (see ``cg_ray.benchmarks.LOADERS``). Errors
point at the exact key, e.g. ``benchmarks.0.local.path: Field required``.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from cg_ray.io.records import FileFormat

ScorerOptions = dict[str, float | int | str | bool]  # a source's keyword options to its scorer


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class FieldMapping(_Strict):
    """Which field of a record holds each part of a normalized row (dotted paths: ``doc.question``): the one
    mapping of benchmark sources and of the service's uploads (``cg_ray.serve.uploads.upload_mapping``)."""

    id: str | None = Field("id", description="row id; null: the 0-based row index")
    benchmark: str | None = Field(
        None, description="per-row benchmark name; a row without one (or null here) gets the source's"
    )
    prompt: str | list[str] = Field(
        "prompt", description="a field, or several joined by blank lines (context, question)"
    )
    reference: str | None = Field("reference", description="gold answer(s); null: none (open-ended)")
    reference_index_base: Literal[0, 1] | None = Field(
        None, description="the reference is an index into choices (0- or 1-based): turned into a letter"
    )
    choices: str | list[str] | None = Field(None, description="a list field, or one field per choice")
    score: str | None = Field(None, description="a precomputed score in [0, 1]")
    response: str | None = Field(None, description="a model response already generated")
    model: str | None = None
    metadata: list[str] | None = Field(None, description="fields kept as metadata; null: all unmapped fields")


class _SourceBase(_Strict):
    benchmark: str | None = Field(None, description="benchmark name; default: from the rows or the file name")
    scorer: str = Field("exact", description="scorer name (see cg_ray.scoring.SCORERS)")
    scorer_options: ScorerOptions = Field(default_factory=dict)
    limit: int | None = Field(None, ge=1, description="keep the first N rows (in file order)")
    prompt_template: str | None = Field(
        None,
        description="text sent to (and read from) the model; {prompt} and {choices} (lettered lines) are replaced",
    )

    @field_validator("scorer")
    @classmethod
    def _known_scorer(cls, name: str) -> str:
        from cg_ray.scoring import SCORERS

        return SCORERS.check(name)


class LocalSource(_SourceBase):
    """A local JSONL / CSV / Parquet file with a field mapping."""

    kind: Literal["local"]
    path: str
    format: FileFormat = "auto"
    fields: FieldMapping = FieldMapping()


class NormalizedSource(_SourceBase):
    """The project's normalized JSONL: ``{id, benchmark, prompt, reference, choices, metadata}``."""

    kind: Literal["normalized"]
    path: str


class ModelOutputsSource(_SourceBase):
    """Scored model outputs (``{id, benchmark, model, output, score}``) joined onto normalized rows.

    With ``scorer: precomputed`` the file's scores are used; with any other scorer the outputs are
    re-scored by us (their scores are dropped)."""

    kind: Literal["model_outputs"]
    path: str = Field(description="normalized benchmark rows")
    outputs: str = Field(description="JSONL of model outputs, joined on id")
    model: str | None = Field(None, description="which model's outputs; required when the file has several")
    on_missing: Literal["drop", "error"] = Field("drop", description="benchmark rows with no output")
    scorer: str = "precomputed"


class HFSource(_SourceBase):
    """A Hugging Face dataset: ``dataset`` (hub id, ``load_dataset``) or ``path`` (``load_from_disk``)."""

    kind: Literal["hf"]
    dataset: str | None = None
    path: str | None = None
    subset: str | None = None
    split: str = "test"
    revision: str | None = None
    fields: FieldMapping = FieldMapping()

    @model_validator(mode="after")
    def _one_location(self) -> HFSource:
        if (self.dataset is None) == (self.path is None):
            raise ValueError("give exactly one of dataset (hub id) or path (a save_to_disk directory)")
        return self


class _HarnessSamples(_SourceBase):
    """lm-evaluation-harness ``--log_samples`` records: one definition for the JSONL file and the leaderboard's
    Parquet copy of the same records."""

    path: str
    filter: str | None = Field(None, description="which filter's record to keep; required if several")
    metric: str | None = Field(None, description="per-sample metric used as score; default: acc / exact_match…")
    prompt_field: str | None = Field(None, description="dotted path (doc.question); default: the rendered context")
    reference_field: str = Field("target", description="dotted path of the gold answer")
    scorer: str = "precomputed"


class LmEvalSource(_HarnessSamples):
    """An lm-evaluation-harness ``--log_samples`` file (``samples_<task>_<date>.jsonl``)."""

    kind: Literal["lm_eval"]


class LeaderboardSource(_HarnessSamples):
    """Open LLM Leaderboard details: the harness's ``--log_samples`` records (as ``lm_eval``) in Parquet."""

    kind: Literal["leaderboard"]


class LightevalSource(_SourceBase):
    """A lighteval ``--save-details`` file (``details_<task>_<timestamp>.parquet``: ``doc``, ``model_response``,
    ``metric``)."""

    kind: Literal["lighteval"]
    path: str
    metric: str | None = Field(
        None, description="per-sample metric used as score; default: the only one, else acc / em / exact_match…"
    )
    prompt_field: str | None = Field(
        None, description="dotted path (doc.query); default: the input sent to the model, else doc.query"
    )
    scorer: str = "precomputed"


class InspectSource(_SourceBase):
    """inspect_ai eval logs (``.eval`` or ``.json``; ``path``: one log or a folder of them), read with inspect's
    own log API (the optional extra ``cg_ray[inspect]``): one row per sample and epoch."""

    kind: Literal["inspect"]
    path: str
    scorer_name: str | None = Field(
        None, description="which of the log's scorers gives the score; default: the only one the samples have"
    )
    missing_score: Literal["error", "skip"] = Field(
        "error", description="a sample without that score: refuse the log, or skip it (counted in the log)"
    )
    model: str | None = Field(None, description="which model's logs, when a folder holds several")
    scorer: str = "precomputed"


ProbeKind = Literal[
    "arithmetic", "letter_count", "palindrome", "date_arithmetic", "unit_conversion", "ordering", "logic"
]
PROBE_KINDS: tuple[ProbeKind, ...] = (
    "arithmetic",
    "letter_count",
    "palindrome",
    "date_arithmetic",
    "unit_conversion",
    "ordering",
    "logic",
)


class ProbesSource(_SourceBase):
    """The embedded synthetic probe suite: one benchmark per kind, exact answers, seeded."""

    kind: Literal["probes"]
    kinds: list[ProbeKind] = Field(default_factory=lambda: list(PROBE_KINDS), min_length=1)
    per_kind: int = Field(40, ge=1)
    seed: int = 0
    # Each probe row names its own scorer; this one is only the fallback for the base-class field.
    scorer: str = "exact"


BenchmarkSource = Annotated[
    LocalSource
    | NormalizedSource
    | ModelOutputsSource
    | HFSource
    | LmEvalSource
    | LeaderboardSource
    | LightevalSource
    | InspectSource
    | ProbesSource,
    Field(discriminator="kind"),
]


def source_label(source: BenchmarkSource) -> str:
    """A short human label of a source for logs and errors."""
    where = getattr(source, "path", None) or getattr(source, "dataset", None) or "embedded"
    return f"{source.kind}:{where}"
