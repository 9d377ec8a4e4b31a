"""`scripts/fdr_simulation.py` regenerates the table of docs/findings.md (issue #59): on a few suites, as a user
runs it, every kind of finding is recorded and each figure the doc states lands in its binomial band. The
script once recorded through a module patch the judgement no longer went through, and printed power 0.000
for every rule; nothing noticed."""

from __future__ import annotations

import pickle
import subprocess
import sys
from pathlib import Path

import pytest

from tests.scripts import load_script

# slow ones here are numbers only: they run beside other tests (Makefile, pytest-all)
pytestmark = pytest.mark.cpu_only

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "fdr_simulation.py"
SUITES = 8  # of the five-effect setting: 40 planted effects, about 25 s on one core


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True)


def test_the_doc_states_every_cell_the_script_writes() -> None:
    fdr = load_script("fdr_simulation")
    text = fdr.DOC.read_text()
    stated = fdr.read_doc_table(text)
    assert set(stated) == {(s, r) for s in fdr.DOC_ROWS for r in fdr.DOC_COLUMNS}
    assert stated["null", "product"].power is None and stated["five", "product"].power is not None
    assert set(fdr.read_doc_coverage(text)) == set(fdr.DOC_ROWS) - {"null"}
    # What `table` writes, the check reads back: the same figures, rounded as the doc shows them.
    tallies = {
        ("five", r): fdr.Tally(suites=300, any_false=29, fdp=4.9, found=1090, effects=1500) for r in fdr.DOC_COLUMNS
    }
    back = fdr.read_doc_table(fdr.doc_table(tallies))
    assert back["five", "product"] == fdr.Stated(round(4.9 / 300, 3), round(29 / 300, 3), round(1090 / 1500, 3))


@pytest.mark.slow
def test_a_few_suites_regenerate_the_doc_table(tmp_path: Path) -> None:
    out = tmp_path / "records"
    collected = _run("collect", "--setting", "five", "--reps", str(SUITES), "--out", str(out))
    assert collected.returncode == 0, collected.stderr[-3000:]
    records = [pickle.loads(f.read_bytes()) for f in sorted(out.glob("*.pkl"))]
    assert len(records) == SUITES
    for record in records:
        kinds = {call["kind"]: call for call in record["calls"]}
        assert sorted(kinds) == ["concepts", "failure_modes", "slices"]
        assert all(any(call["per_split"]) for call in kinds.values())
        assert len(kinds["failure_modes"]["members"]) == len(
            {k for s in kinds["failure_modes"]["per_split"] for k, _, _ in s}
        )
    checked = _run("check", str(out))
    assert checked.returncode == 0, checked.stdout + checked.stderr[-3000:]
    lines = checked.stdout.splitlines()
    # every rule's three figures, and the intervals' coverage: each within its band
    assert sum(line.startswith("five ") and line.endswith(" ok") for line in lines) == 3 * 5 + 1, checked.stdout
