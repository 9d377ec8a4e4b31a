"""`read_run(path) -> Run`: a published run directory as one typed, read-only Python object.

A run directory is what `cg-ray metrics`, `cg-ray run`, a service analysis or one model of an arena publish
(docs/usage.md, "Run directory"). `Run` holds what users ask of it first as typed fields (the model, the
reader, the rows, the false discovery rate and splits the findings were judged with, when it was made) and
hands out every table as a pandas DataFrame, read from the directory each time it is asked for; an optional
part the run does not hold is None. Every JSON document is read through its `cg_ray.artifacts.contract`
model, so a run written by a newer cg_ray is refused with an error naming the file and both versions. A run
of an older layout is read under today's column names: format 2 and older said `residual` for the held-out
figure in failure_modes.parquet but for the in-sample one in concepts.parquet and the profiles (`OLD_COLUMNS`,
file -> old -> new: `residual*` -> `heldout_residual*` in failure_modes.parquet, `residual_in_sample` ->
`in_sample_residual`; `residual*` -> `in_sample_residual*` and `residual_heldout*` -> `heldout_residual*` in
concepts.parquet, weaknesses / strengths / coverage_gaps.parquet).

Which columns are held out and which in sample is said in each table's docstring below: a finding's verdict
(`confirmed`, `q_value`, …) always rests on held-out figures (docs/findings.md), the paper's metrics
(X_model, X_bench, χ) are in sample.
"""

from __future__ import annotations

import datetime as dt
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, TypeVar

import pandas as pd

from cg_ray import schemas as S
from cg_ray.activations.recorded import RecordedReader, reader_of_run
from cg_ray.api import analyses as A
from cg_ray.api.findings import KINDS, findings_table
from cg_ray.artifacts import contract as C
from cg_ray.artifacts.layout import ArenaDir, RunDir
from cg_ray.artifacts.renamed import RUN_COLUMNS
from cg_ray.errors import NotARunDirectory

# The newest run layout this cg_ray reads: summary.json's format_version (`RunSummary.version`; 2 since
# failure modes and slices are held out with verdicts, 3 since the residual columns are named for what they
# hold). Runs without one read as version 0, the same layout as 1 and 2. A run of version 2 or older is read
# with its old columns renamed (`OLD_COLUMNS`); a newer one is refused.
FORMAT_VERSION: Final = C.RunSummary.version
OLD_COLUMNS: Final = RUN_COLUMNS  # file -> old column -> new: what an older run's tables are read under

N = TypeVar("N", int, float)
_MAKE_ONE = "`cg-ray metrics --rows ROWS --out DIR` or `cg-ray run CONFIG` makes one"


@dataclass(frozen=True)
class Run:
    """A published run directory (`read_run`). The fields are read once, when the run is opened; the
    DataFrames each time they are asked for (so a step that changed the run since shows)."""

    path: Path
    format_version: int  # summary.json's (FORMAT_VERSION: the newest this cg_ray reads)
    summary: C.RunSummary  # summary.json, typed; producers' extra keys in `summary.model_extra`
    manifest: C.RunManifest | None  # manifest.json: `cg-ray run`'s, or only the post-publish steps; None: none
    model: str | None  # the evaluated model, as the run names it (None: a rows file of one unnamed model)
    reader: RecordedReader  # the model + SAE that read the rows (`reader.known` False: not recorded, with why)
    d_sae: int  # the SAE's width: concept ids are 0 … d_sae − 1
    n_rows: int
    n_scored_rows: int
    fdr: float | None  # the false discovery rate findings were confirmed at (None: made before)
    splits: int | None  # the grouped splits they were judged over (None: made before)
    created: dt.datetime  # manifest.json's created_utc, else when summary.json was written (UTC)
    steps: tuple[Mapping[str, Any], ...]  # post-publish steps recorded in manifest.json ({step, at, files, …})

    @property
    def _dir(self) -> RunDir:
        return RunDir(self.path)

    # ---- summary.json, as tables and mappings

    @property
    def benchmarks(self) -> pd.DataFrame:
        """Per benchmark (summary.json's `benchmarks`): benchmark, n_rows, n_scored_rows, mean_score,
        n_active_concepts, missing_pct, class_counts, …; all over every row of the benchmark (in sample)."""
        return pd.DataFrame(self.summary.benchmarks)

    @property
    def judgement(self) -> dict[str, Any] | None:
        """How the findings were judged held out (summary.json's profile.beyond.judgement, `crossfit` before
        format 3): splits, groups, fdr, the decision rule in words, and per kind how many were candidates and
        how many confirmed (of every finding judged; the tables list the top ones). None: a run made before
        held-out findings."""
        beyond = ((self.summary.model_extra or {}).get("profile") or {}).get("beyond") or {}
        judged = beyond.get("judgement") or beyond.get("crossfit")
        return dict(judged) if isinstance(judged, Mapping) else None

    # ---- findings

    def findings(self, confirmed_only: bool = True) -> pd.DataFrame:
        """The run's judged findings in one table, confirmed ones only unless `confirmed_only` is False:
        failure modes, slices, and the weakness / strength profiles' concepts that were tested.

        Columns: kind (failure_mode / slice / weakness / strength), rank (in its own table), finding (in
        words), concept_ids, n_rows (rows of the finding over the whole run, in sample), measure (what
        `estimate` is), estimate / low / high (**held out**, a difference in score: the median split's
        estimate on the halves that did not choose it, with the interval of the decision rule, which lies
        below 0 — above for a strength — whenever the finding is confirmed), p_value, q_value, confirmed
        (q_value ≤ fdr), splits_selected, n_heldout, n_clusters, mde (all **held out**), example_row_ids."""
        tables = {kind.file: self._table(kind.file) for kind in KINDS}
        return findings_table(tables, confirmed_only=confirmed_only)

    @property
    def failure_modes(self) -> pd.DataFrame | None:
        """failure_modes.parquet: groups of concepts whose rows score below their metadata cells, confirmed
        first. **Held out**: heldout_residual (+ _low / _high) and the verdict columns (p_value, q_value,
        confirmed, splits_selected, n_heldout, n_clusters, mde). **In sample** (every scored row of the mode):
        mean_score, expected_score, in_sample_residual, n_rows, n_scored. Also description, terms,
        term_shares, background_shares, concept_ids, firing_thresholds, adjusted_for, example_row_ids."""
        return self._table(S.FAILURE_MODES_FILE)

    @property
    def slices(self) -> pd.DataFrame | None:
        """slices.parquet: the weakest conjunctions of metadata values (`slice`, `conditions` as JSON),
        confirmed first. **Held out**: mean_score, low, high, suite_mean (the other held-out rows' mean) and
        the verdict columns. **In sample**: mean_in_sample, n_rows (scored rows of the slice)."""
        return self._table(S.SLICES_FILE)

    @property
    def weaknesses(self) -> pd.DataFrame | None:
        """weaknesses.parquet: the weakness profile in rank order (rank 1 = most confidently weak).
        **In sample**: X_model with X_model_low / X_model_high, adjusted_gap (+ _low / _high),
        in_sample_residual (+ _low / _high: the metadata-adjusted gap over every row), n_rows, n_eff, n_benchmarks.
        **Held out**: heldout_residual (+ _low / _high) and the verdict columns (null / not confirmed when
        the concept was never a candidate). Also concept_id, label, description, group, members,
        metadata_enrichment, example_row_ids, adjusted_for, terms."""
        return self._table(S.WEAKNESSES_FILE)

    @property
    def strengths(self) -> pd.DataFrame | None:
        """strengths.parquet: the weaknesses' columns, for the concepts the model is most confidently strong
        on (held-out verdicts tested in the other direction)."""
        return self._table(S.STRENGTHS_FILE)

    @property
    def coverage_gaps(self) -> pd.DataFrame | None:
        """coverage_gaps.parquet: the weaknesses' columns, for under-covered concepts (class `under`, least
        covered first); coverage is in sample and carries no verdict."""
        return self._table(S.COVERAGE_GAPS_FILE)

    # ---- the metrics tables (the paper's figures: all in sample)

    @property
    def concepts(self) -> pd.DataFrame | None:
        """concepts.parquet, one row per concept (**in sample**): concept_id, label, X_bench, X_model,
        n_benchmarks_active, n_active_rows, coverage_class, is_model_gap, n_eff, the 95% intervals
        (X_model_low / _high, adjusted_gap with _low / _high), in_sample_residual (+ _low / _high), adjusted_for."""
        return self._table(S.CONCEPTS_FILE)

    @property
    def benchmark_concepts(self) -> pd.DataFrame | None:
        """benchmark_concepts.parquet, one row per (benchmark, concept) with Σ s̃ > 0 (**in sample**):
        chi_bench, chi_model, n_active_rows, coverage_class, n_eff, chi_model_low, chi_model_high."""
        return self._table(S.BENCHMARK_CONCEPTS_FILE)

    def rows(self, columns: list[str] | None = None) -> pd.DataFrame:
        """rows.parquet (one row per item: row_id, benchmark, model, score, n_tokens, concept_ids,
        concept_acts, and what the producer added: metadata, prompt, response, …); `columns` reads only those
        (a large run's activations are the bulk of it)."""
        table = self._dir.read_table(S.ROWS_FILE, columns)
        if table is None:
            raise NotARunDirectory(f"{S.ROWS_FILE} is missing", path=str(self.path))
        frame: pd.DataFrame = table.to_pandas()
        return frame

    # ---- what later steps added (None when the run has not had them)

    @property
    def descriptions(self) -> pd.DataFrame | None:
        """descriptions.parquet of `cg-ray describe` / `explain`: per described concept its description,
        source, metadata_enrichment, top_ngrams, detection_score, examples (JSON), … (docs/readable.md)."""
        return self._table(S.DESCRIPTIONS_FILE)

    @property
    def themes(self) -> C.Themes | None:
        """themes.json of `cg-ray describe`: co-active concept groups."""
        return A.read_optional(self._dir, S.THEMES_FILE, C.Themes)

    @property
    def validation(self) -> C.ValidateReport | None:
        """validate.json of `cg-ray validate --out RUN`: the profile's held-out lift and the null check."""
        return A.read_optional(self._dir, S.VALIDATE_FILE, C.ValidateReport)

    @property
    def robustness(self) -> A.Robustness | None:
        """robustness/ of `cg-ray robustness --out RUN/robustness` (in sample: subsamples of the run's rows)."""
        return A.read_robustness(self._dir)

    @property
    def probe(self) -> A.Probe | None:
        """probe/ of `cg-ray probe RUN`: each gap tested on new items (`Probe.results`, `Probe.items`)."""
        return A.read_probe(self._dir)

    @property
    def scope(self) -> A.Scope | None:
        """scope/ of `cg-ray scope RUN`: what each benchmark leaves out (`Scope.gaps`, `Scope.coverage`)."""
        return A.read_scope(self._dir)

    @property
    def augment(self) -> A.Augment | None:
        """augment/ of `cg-ray augment RUN`: items for a benchmark's gaps, coverage before → after."""
        return A.read_augment(self._dir)

    @property
    def sensitivity(self) -> A.Sensitivity | None:
        """sensitivity/ of `cg-ray sensitivity RUN --reader NAME`: whether each finding holds when other SAEs
        read the rows (`Sensitivity.findings`, one row per finding and reader; `Sensitivity.pairs`)."""
        return A.read_sensitivity(self._dir)

    def _table(self, name: str) -> pd.DataFrame | None:
        table = self._dir.read_table(name)
        return None if table is None else table.to_pandas()


def read_run(path: str | os.PathLike[str]) -> Run:
    """The run directory at `path` as a `Run`. Raises `cg_ray.errors.NotARunDirectory` (naming the path and
    what is missing) when it is not a published run, and `cg_ray.errors.InputError` naming the file and both
    versions when a document of it was written by a newer format than this cg_ray reads."""
    run = _published(Path(path))
    summary = C.read_document(run.summary, C.RunSummary)
    manifest = C.read_document(run.manifest, C.RunManifest) if run.has(S.MANIFEST_FILE) else None
    extra = summary.model_extra or {}
    model = extra.get("evaluated_model") or extra.get("model_filter")
    rows_file = extra.get("rows_file")
    return Run(
        path=run.path,
        format_version=summary.format_version,
        summary=summary,
        manifest=manifest,
        model=None if model is None else str(model),
        reader=reader_of_run(run.path, None if rows_file is None else str(rows_file)),
        d_sae=summary.d_sae,
        n_rows=summary.n_rows,
        n_scored_rows=summary.n_scored_rows,
        fdr=_number(summary.config.get("fdr"), float),
        splits=_number(summary.config.get("splits"), int),
        created=_created(run, manifest),
        steps=tuple(manifest.steps) if manifest is not None else (),
    )


def _published(path: Path) -> RunDir:
    run = RunDir(path)
    if not path.exists():
        raise NotARunDirectory("not a run directory: no such directory", path=str(path))
    if not path.is_dir():
        hint = " (pass the run directory, not a table)" if path.suffix == ".parquet" else ""
        raise NotARunDirectory(f"not a run directory: a file, not a directory{hint}", path=str(path))
    if not run.has(S.SUMMARY_FILE):
        arena = ArenaDir(path).summary.is_file()
        hint = f"an arena run: its runs are under {S.ARENA_MODELS_DIR}/" if arena else _MAKE_ONE
        raise NotARunDirectory(f"not a run directory: {S.SUMMARY_FILE} is missing ({hint})", path=str(path))
    return run


def _number(value: object, kind: type[N]) -> N | None:
    """A setting of summary.json's config as `kind`; None when the run predates it."""
    return kind(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _created(run: RunDir, manifest: C.RunManifest | None) -> dt.datetime:
    stamp = (manifest.model_extra or {}).get("created_utc") if manifest is not None else None
    if isinstance(stamp, str):
        try:
            return dt.datetime.fromisoformat(stamp)
        except ValueError:
            pass
    return dt.datetime.fromtimestamp(run.summary.stat().st_mtime, dt.UTC)
