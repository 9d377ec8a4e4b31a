"""A gap the LLM writer cannot express falls back to a family, and the writer's requests and what they lost
stay counted (in the work directory, results.parquet and the summary), not only in the note."""

from __future__ import annotations

from pathlib import Path

from cg_ray.activations.config import ReaderConfig
from cg_ray.generation.config import GenerationConfig
from cg_ray.probe.checked import Checked
from cg_ray.probe.config import ProbeConfig
from cg_ray.probe.families import match_family
from cg_ray.probe.items import Gap, GenerationOutcome
from cg_ray.probe.plan import GapWriter, ProbePlan, writer_of
from cg_ray.probe.run import _requests, _write_one
from cg_ray.probe.work import Work

GAP = Gap(gap_id="mode:1", kind="mode", concept_ids=(7,), description="Rows with “taller than”",
          terms=("taller than",), examples=("Alice is taller than Bob. Is Bob taller than Alice?",),
          benchmark="probes_logic", scorer="exact", effect=-0.2, confirmed=False, n_rows=20)  # fmt: skip


class Unusable:
    """A writer whose every answer was malformed (SmolLM2-135M wrote the same question twice)."""

    name = "endpoint:tiny"

    def generate(self, gap: Gap, n_pairs: int, seed: int) -> GenerationOutcome:
        return GenerationOutcome(requests=12, malformed=11, wrong_reference=1, note="could not express this gap")


def test_a_fallback_keeps_the_writers_requests_and_losses(tmp_path: Path) -> None:
    plan = ProbePlan(run=tmp_path, gaps=[GAP], writers={GAP.gap_id: GapWriter(llm=True, family=match_family(GAP))},
                     rules={GAP.gap_id: {7: 1.0}},
                     reader=ReaderConfig(), model=GenerationConfig.model_validate({"backend": "fake"}),
                     config=ProbeConfig(pairs=8))  # fmt: skip
    outcome, name = _write_one(plan, GAP.gap_id, Unusable())  # type: ignore[arg-type]
    assert name == "family:logic.chain" and len(outcome.pairs) == 8 and outcome.requests == 8
    assert (outcome.writer_requests, outcome.malformed, outcome.wrong_reference) == (12, 11, 1)
    assert "could not express this gap" in outcome.note
    work = Work(tmp_path / "work")
    work.begin({}, fresh=True)
    work.save_written(GAP.gap_id, outcome, name)
    assert work.written(GAP.gap_id) == (outcome, name)
    checked = Checked(written={GAP.gap_id: outcome})
    counts = _requests(checked, {})
    assert (counts["writer"], counts["family_draws"], counts["malformed"], counts["wrong_reference"]) == (12, 8, 11, 1)


def test_a_family_without_a_writer_is_not_noted_as_missing(tmp_path: Path) -> None:
    """Families only (no writer): the note names the family, not "no writer and no family fits"."""
    plan = ProbePlan(run=tmp_path, gaps=[GAP], writers={GAP.gap_id: GapWriter(llm=False, family=match_family(GAP))},
                     rules={GAP.gap_id: {}},
                     reader=ReaderConfig(), model=GenerationConfig.model_validate({"backend": "fake"}),
                     config=ProbeConfig(pairs=5))  # fmt: skip
    outcome, name = _write_one(plan, GAP.gap_id, None)
    assert name == "family:logic.chain" and outcome.note == "written by family:logic.chain"
    assert (outcome.writer_requests, outcome.malformed, len(outcome.pairs)) == (0, 0, 5)
    config = ProbeConfig(families="never")
    never = ProbePlan(**{**plan.__dict__, "writers": {GAP.gap_id: writer_of(GAP, config)}, "config": config})
    assert _write_one(never, GAP.gap_id, None)[0].note == "no writer and no family fits this gap"
