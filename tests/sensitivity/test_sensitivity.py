"""`cg-ray sensitivity` with stand-in readers behind the real reader interface (the hashing fake, salted by the
reader's name): a planted effect is found by a reader that names the same rows with other concept ids and not
by one blind to the words carrying it; scores permuted within cells give nothing under any reader; a false
finding (a dip in the sample only) is found by the other reader too (the same rows) and nothing says it
stands until fresh rows confirm it; bad input is a clear error; a second call keeps the readers already read. The real
reader and the shipped SAEs: tests/sensitivity/test_sensitivity_real.py."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from cg_ray import schemas as S
from cg_ray.activations.packing import pack_concepts
from cg_ray.artifacts.layout import SENSITIVITY_FINDINGS, SENSITIVITY_PAIRS, SENSITIVITY_SUMMARY, RunDir
from cg_ray.artifacts.publish import atomic_directory
from cg_ray.artifacts.rows import open_rows
from cg_ray.cli import main
from cg_ray.config import MetricsConfig
from cg_ray.errors import ConfigError, InputError
from cg_ray.run_outputs import publish_metrics
from cg_ray.sensitivity.config import SensitivityConfig
from cg_ray.sensitivity.pairs import ReaderSide, activations, match
from cg_ray.sensitivity.run import plan_sensitivity, run_sensitivity
from cg_ray.testing.fakes import SaltedHashingReader, word_concept
from tests.profile.planted_suites import write_effects_suite

pytestmark = pytest.mark.usefixtures("ray_module")

FAKE = "cg_ray.testing.fakes:SaltedHashingReader.from_config"
SALTED, BLIND = "salted", "blind:e0"  # blind to "shape0" / "figure0", the words of the planted effect


def make_run(tmp: Path, name: str, *, seed: int = 3, permute: bool = False) -> tuple[Path, np.ndarray]:
    """A 3,000-row suite whose rows 'shape0 figure0' (8%) score 0.3 below their type × level cell, read by the
    fake's default reader and judged by `publish_metrics` with the defaults."""
    suite = tmp / f"{name}-suite.parquet"
    carried = write_effects_suite(suite, seed, [(0.08, 0.3)], n=3000)[0]
    table = pq.read_table(suite)
    if permute:  # within the cells: the cell effects stay, the planted one goes
        meta = [json.loads(m) for m in table[S.METADATA].to_pylist()]
        cells = np.array([f"{m['type']}|{m['level']}" for m in meta])
        scores = table[S.SCORE].to_numpy().copy()
        rng = np.random.default_rng(seed)
        for cell in np.unique(cells):
            at = np.flatnonzero(cells == cell)
            scores[at] = scores[rng.permutation(at)]
        table = table.set_column(table.schema.get_field_index(S.SCORE), S.SCORE, pa.array(scores))
    packed = pack_concepts(SaltedHashingReader("default").read(table["prompt"].to_pylist()))
    for column, values in ((S.N_TOKENS, packed.n_tokens), (S.CONCEPT_IDS, packed.concept_ids)):
        table = table.set_column(table.schema.get_field_index(column), column, values)
    table = table.set_column(table.schema.get_field_index(S.CONCEPT_ACTS), S.CONCEPT_ACTS, packed.concept_acts)
    table = table.replace_schema_metadata({S.D_SAE_METADATA_KEY: str(SaltedHashingReader.D_SAE).encode()})
    run = tmp / name
    with atomic_directory(run) as building:
        out = RunDir(building)
        out.write(S.ROWS_FILE, table)
        reader = {"model": "hashing-fake", "sae": "default", "text": "prompt"}
        manifest = {"cg_ray_version": "test", "config": {"reader": reader}, "reader": {"d_sae": 2048, "factory": FAKE}}
        out.write_json(S.MANIFEST_FILE, manifest)
        publish_metrics(out, MetricsConfig(), None, {"rows_file": str(suite)})
    return run, carried


def config(run: Path, *readers: str) -> SensitivityConfig:
    return SensitivityConfig(run=run, readers=readers, reader_factory=FAKE)


@pytest.fixture(scope="module")
def planted(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, np.ndarray, dict[str, object]]:
    run, carried = make_run(tmp_path_factory.mktemp("planted"), "run")
    return run, carried, run_sensitivity(config(run, SALTED, BLIND))


def test_the_planted_mode_is_found_by_a_reader_with_other_ids_and_not_by_a_blind_one(planted) -> None:
    run, carried, _ = planted
    found = RunDir(run).read_table(SENSITIVITY_FINDINGS).to_pylist()
    modes = [f for f in found if f["kind"] == "failure_mode"]
    assert modes, "the run confirms the planted failure mode"
    planted_key = max(modes, key=lambda f: f["n_rows"])["finding"]
    by_reader = {f["reader"]: f for f in modes if f["finding"] == planted_key}
    salted, blind = by_reader[SALTED], by_reader[BLIND]
    assert salted["status"] == S.FOUND and salted["jaccard"] > 0.9 > 0.1 > salted["jaccard_by_chance"]
    assert salted["best_q"] <= 0.1  # its twin, confirmed
    assert blind["status"] == S.NOT_FOUND
    assert blind["best_q"] is None or blind["best_q"] > 0.1  # blind to the words: no candidate confirmed there
    # the run's own estimate of its rows, the same whichever reader (its own splits), and no verdict beside it
    assert salted["own_estimate"] == blind["own_estimate"] and abs(salted["own_estimate"] + 0.3) < 0.12
    assert not any(name.startswith("effect") for name in salted)
    assert abs(salted["n_rows"] - int(carried.sum())) <= 0.05 * carried.sum()


def test_pairs_match_the_planted_concept_to_its_twin_and_the_summary_counts(planted) -> None:
    run, _, summary = planted
    pairs = {p["reader_b"]: p for p in RunDir(run).read_table(SENSITIVITY_PAIRS).to_pylist()}
    assert {p["method"] for p in pairs.values()} == {"activation correlation"}  # a stand-in has no decoder
    assert pairs[SALTED]["top_rows_jaccard"] > 0.9  # the weakest concepts' rows: the same words, the same rows
    ours, salted = RunDir(run), RunDir(run).sensitivity_reader(SALTED)
    a, b = (ReaderSide(n, None, None, d) for n, d in (("default", ours), (SALTED, salted)))
    acts_a, acts_b = (activations(open_rows(d.rows), None) for d in (ours, salted))
    m = match(a, b, acts_a, acts_b)
    shape0 = word_concept("shape0", SaltedHashingReader.D_SAE)
    twin = word_concept(f"{SALTED}|shape0", SaltedHashingReader.D_SAE)
    at = np.flatnonzero(m.a == shape0)
    assert at.size == 1 and m.b[at[0]] == twin and m.similarity[at[0]] > 0.9
    written = RunDir(run).read_json(SENSITIVITY_SUMMARY)
    assert written["rule"].startswith("found:") and "not replication" in written["rule"]
    assert [r["name"] for r in written["readers"]] == [SALTED, BLIND] and written["format_version"] == 2
    found = RunDir(run).read_table(SENSITIVITY_FINDINGS).to_pylist()
    for r in summary["readers"]:
        mine = [f for f in found if f["reader"] == r["name"]]
        n_slices = sum(1 for f in mine if f["kind"] == "slice")
        assert sum(r["statuses"].values()) == len(mine) - n_slices and sum(r["slices"].values()) == n_slices
        assert r["slices"][S.FOUND] == n_slices  # metadata: every reader finds a slice
    assert RunDir(run).steps()[-1]["step"] == "sensitivity"


def test_a_second_call_keeps_the_readers_already_read(planted) -> None:
    run, _, _ = planted
    before = RunDir(run).sensitivity_reader(SALTED).rows.stat().st_mtime_ns
    plan = plan_sensitivity(config(run, SALTED))
    assert plan.done == [SALTED] and "kept from before: salted" in plan.describe()
    again = run_sensitivity(config(run, SALTED))
    assert again["readers"][0]["resumed"] is True  # type: ignore[index]
    assert RunDir(run).sensitivity_reader(SALTED).rows.stat().st_mtime_ns == before
    rows = RunDir(run).read_table(SENSITIVITY_FINDINGS)
    assert set(rows["reader"].to_pylist()) == {SALTED}
    assert pc.all(pc.equal(rows["status"], S.FOUND)).as_py() or rows.num_rows == 0


def test_scores_permuted_within_cells_confirm_nothing_under_any_reader(tmp_path: Path) -> None:
    """The cells' own effects stay (slices of type x level are real); nothing beyond them may be confirmed."""
    run, _ = make_run(tmp_path, "null", seed=5, permute=True)
    summary = run_sensitivity(config(run, SALTED, BLIND))
    kinds = set(RunDir(run).read_table(SENSITIVITY_FINDINGS)["kind"].to_pylist())
    assert kinds <= {"slice"}  # no failure mode, no concept under the run's reader
    for name in (SALTED, BLIND):
        confirmed = RunDir(run).sensitivity_reader(name).read_summary()["profile"]["beyond"]["judgement"]["confirmed"]
        assert confirmed["failure_modes"] == confirmed["concepts"] == 0, name
    assert all(sum(r["statuses"].values()) == 0 for r in summary["readers"])


def test_a_false_finding_is_found_by_another_reader_and_said_to_stand_nowhere(planted, tmp_path: Path) -> None:
    """A null world whose sample dips by chance: the planted rows' dip is in the run's scores only, as a chance
    dip would be, and fresh rows of that world score like the rest (the probe refutes it). Another reader
    naming the same rows reads the same scores on the same halves, so it finds the finding too: robustness to
    the reader, not evidence. Nothing says it stands until fresh rows confirm it: no verdict column, the rule
    and the view say "not replication", and the probe's refutation is what the section shows."""
    from cg_ray.artifacts.layout import PROBE_RESULTS
    from cg_ray.artifacts.probe import ProbeResult
    from cg_ray.report.sensitivity import sensitivity_view
    from cg_ray.schemas.probe import PROBE_RESULTS_SCHEMA

    run = Path(shutil.copytree(planted[0], tmp_path / "run"))
    found = RunDir(run).read_table(SENSITIVITY_FINDINGS)
    modes = [f for f in found.to_pylist() if f["kind"] == "failure_mode" and f["reader"] == SALTED]
    mode = max(modes, key=lambda f: f["n_rows"])
    assert mode["status"] == S.FOUND  # the other reader reads the same dip on the same halves
    assert not [c for c in found.column_names if "effect" in c or "confirm" in c or "replicat" in c]
    view = sensitivity_view(RunDir(run))
    assert view is not None and "not replication" in view["rule"]
    assert all(f["fresh_rows"] is None for f in view["findings"]) and view["fresh"].startswith("none tested")
    said = json.dumps(view)
    assert "replicates" not in said and "holds" not in said and "on new items" not in said
    refuted = ProbeResult(mode["finding"], "refuted", 60, probe=1)  # fresh rows of the null world
    RunDir(run).write_table(PROBE_RESULTS, pa.Table.from_pylist([refuted.row()], schema=PROBE_RESULTS_SCHEMA))
    view = sensitivity_view(RunDir(run))
    assert view is not None and view["fresh"] == "on fresh rows (cg-ray probe): 0 of 1 probed confirmed"
    shown = next(f for f in view["findings"] if f["finding"] == mode["finding"])
    assert shown["fresh_text"] == "on new items (cg-ray probe): refuted"
    assert shown["other_readers"].startswith(f"{SALTED} ✓")  # found by the other reader all the same


def test_a_run_without_the_recorded_concepts_is_judged_again_to_the_same_findings(planted, tmp_path: Path) -> None:
    """A run written before summary.json recorded its confirmed concepts: its judgement is made again, and the
    findings (keys, directions, rows) and splits are those read from the record."""
    from cg_ray.artifacts.rows import open_rows
    from cg_ray.sensitivity.findings import read_findings

    run, _, _ = planted
    old = Path(shutil.copytree(run, tmp_path / "old", ignore=shutil.ignore_patterns("sensitivity")))
    summary = json.loads((old / S.SUMMARY_FILE).read_text())
    del summary["profile"]["beyond"]["judgement"]["confirmed_concepts"]
    (old / S.SUMMARY_FILE).write_text(json.dumps(summary))
    read, read_plan = read_findings(RunDir(run), open_rows(run / S.ROWS_FILE), None, MetricsConfig())
    again, again_plan = read_findings(RunDir(old), open_rows(old / S.ROWS_FILE), None, MetricsConfig())
    assert any(f.kind == "concept" for f in read)
    assert [(f.key, f.direction, f.rows.tolist()) for f in read] == [
        (f.key, f.direction, f.rows.tolist()) for f in again
    ]
    assert [s.choosing.tolist() for s in read_plan.splits] == [s.choosing.tolist() for s in again_plan.splits]


def test_dry_run_says_rows_readers_and_time(planted, capsys: pytest.CaptureFixture[str]) -> None:
    run, _, _ = planted
    code = main(["sensitivity", str(run), "--reader", "other", "--dry-run", "--reader-factory", FAKE])
    out = capsys.readouterr().out
    assert code == 0 and "3,000 rows" in out and "1 reader(s) to read (other)" in out and "min of reading" in out


def test_bad_input_is_a_clear_error(planted, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run, _, _ = planted
    with pytest.raises(ConfigError, match="unknown reader 'nope'; shipped readers: default, l20-seed7"):
        plan_sensitivity(SensitivityConfig(run=run, readers=("nope",)))
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(InputError, match=r"rows\.parquet is missing"):
        plan_sensitivity(config(empty, SALTED))
    with pytest.raises(ConfigError, match="the run's own reader"):
        plan_sensitivity(config(run, "default"))
    with pytest.raises(ValueError, match="named twice"):
        config(run, SALTED, SALTED)
    assert main(["sensitivity", str(empty), "--reader", SALTED, "--reader-factory", FAKE]) == 2
    assert "rows.parquet is missing" in capsys.readouterr().err
    other_model = tmp_path / "other-model"  # rows read by the real reader on another model
    shutil.copytree(run, other_model, ignore=shutil.ignore_patterns("sensitivity"))
    reader = {"model": "gpt2", "sae": "saelens-disk:/somewhere", "text": "prompt"}
    manifest = {"cg_ray_version": "test", "config": {"reader": reader}, "reader": {"d_sae": 2048}}
    RunDir(other_model).write_json(S.MANIFEST_FILE, manifest)
    with pytest.raises(ConfigError, match="reads smollm2-135m-instruct; this run's rows were read by gpt2"):
        plan_sensitivity(SensitivityConfig(run=other_model, readers=("l20-seed7",)))
