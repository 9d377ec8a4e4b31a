"""The probe ledger: the probes each gap has had, wherever its run lives (docs/probe.md, "The ledger").

A probe's share of `--fdr` comes from its number (power.share: 0.8, then 0.2 / (k(k − 1))). Numbered within
RUN/probe/ alone, the count restarts wherever that folder does: `cg-ray metrics --overwrite` or `cg-ray run`
into the same directory, a copy of the run, a new output directory over the same rows. Each restart spends
the first probe's 0.8 again: ten restarts confirm a null gap with probability 0.116 where the bound says 0.025.

So the count lives here, outside the run, keyed by what a probe tests: the gap's **key** is a hash of the
run's rows (each row's id, benchmark and model: the items and the model whose scores they are, not the scores,
so a re-run of the same model over the same suite is the same test) and the gap's rule (its kind and its
concepts with their firing thresholds). One JSON file per key records the `fdr` its first probe fixed and the
number of every probe of it. A probe's number is one more than the highest any of its gaps had here, and than
the run's own earlier probes (history.Earlier): every gap's numbers rise strictly, whatever directory its run
is in, so a null gap probed any number of times is confirmed with probability at most Σ share(k) · fdr ≤ fdr.

Where: `--ledger DIR`, else $CG_RAY_LEDGER, else ~/.cache/cg_ray/probe_ledger (beside the models' cache: per
user, and kept by anything that replaces a run). A probe takes its number under a lock when it judges (`spend`),
before it publishes: a probe that fails after that has spent it, which errs on the safe side. A different fdr
on a gap that has one is refused (`LedgerFdrError`), naming the file and the fdr recorded.
"""

from __future__ import annotations

import datetime as dt
import fcntl
import hashlib
import json
import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from cg_ray import schemas as S
from cg_ray.errors import ConfigError
from cg_ray.probe.items import Gap

ENV = "CG_RAY_LEDGER"
DEFAULT_DIR = Path("~/.cache/cg_ray/probe_ledger")
KEY_COLUMNS = (S.ROW_ID, S.BENCHMARK, S.MODEL)  # what a row is, not how it scored
LOCK = ".lock"


class LedgerFdrError(ConfigError):
    """A probe's --fdr differs from the one a gap's ledger fixed at its first probe."""


def ledger_dir(given: Path | None = None) -> Path:
    """`given`, else $CG_RAY_LEDGER, else ~/.cache/cg_ray/probe_ledger."""
    chosen = given or (Path(os.environ[ENV]) if os.environ.get(ENV) else DEFAULT_DIR)
    return chosen.expanduser()


def rows_digest(rows: Path) -> str:
    """sha256 of the rows' ids, benchmarks and models (sorted: the order rows were written in does not
    matter), read a batch at a time."""
    file = pq.ParquetFile(rows)
    columns = [c for c in KEY_COLUMNS if c in file.schema_arrow.names]
    lines: list[str] = []
    for batch in file.iter_batches(columns=columns, batch_size=65_536):
        values = [batch.column(c).to_pylist() for c in columns]
        lines += ["\t".join("" if v is None else str(v) for v in row) for row in zip(*values, strict=True)]
    digest = hashlib.sha256()
    for line in sorted(lines):
        digest.update(line.encode())
        digest.update(b"\n")
    return digest.hexdigest()


def gap_key(rows: str, gap: Gap, rule: Mapping[int, float]) -> str:
    """The key of one gap: the rows' digest and its rule (kind, concepts, thresholds to 6 significant digits,
    so a threshold recomputed from the same rows reads the same)."""
    text = json.dumps(
        {"rows": rows, "kind": gap.kind, "rule": sorted((int(c), float(f"{t:.6g}")) for c, t in rule.items())}
    )
    return hashlib.sha256(text.encode()).hexdigest()[:32]


@dataclass(frozen=True)
class Ledger:
    """The ledger at `root`, for the gaps of one probe (gap id → key)."""

    root: Path
    keys: dict[str, str]

    def file(self, gap_id: str) -> Path:
        return self.root / f"{self.keys[gap_id]}.json"

    def entry(self, gap_id: str) -> dict[str, Any] | None:
        path = self.file(gap_id)
        if not path.is_file():
            return None
        found: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
        return found

    def last(self, gap_id: str) -> int:
        """The highest probe number the gap's ledger holds (0: never probed)."""
        entry = self.entry(gap_id)
        return max((p["probe"] for p in entry["probes"]), default=0) if entry else 0

    def next_number(self, at_least: int) -> int:
        """The next probe's number: above every number of its gaps here, and at least `at_least` (the run's own
        next number)."""
        return max([at_least, *(self.last(g) + 1 for g in self.keys)])

    def check_fdr(self, fdr: float) -> None:
        """Refuse an fdr other than the one a gap's first probe fixed."""
        for gap_id in self.keys:
            entry = self.entry(gap_id)
            if entry is not None and entry["fdr"] != fdr:
                raise LedgerFdrError(
                    f"--fdr {fdr:g} differs from the fdr {entry['fdr']:g} that the probe ledger {self.file(gap_id)} "
                    f"fixed for {gap_id} at its first probe: each gap keeps one fdr, so that its probes' shares "
                    f"sum to at most it (use --fdr {entry['fdr']:g}, or another --ledger for a new study)"
                )

    def spend(self, at_least: int, fdr: float, run: Path, description: Mapping[str, str]) -> int:
        """Take the next number for every gap at once, under the ledger's lock, and record it; returns it."""
        with self._locked():
            self.check_fdr(fdr)
            number = self.next_number(at_least)
            at = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
            for gap_id in self.keys:
                entry = self.entry(gap_id) or {"key": self.keys[gap_id], "fdr": fdr, "probes": []}
                entry["gap"] = description.get(gap_id, gap_id)
                entry["probes"].append({"probe": number, "at": at, "run": str(run.resolve()), "gap_id": gap_id})
                _write(self.file(gap_id), entry)
        return number

    def text(self) -> str:
        """'probe ledger DIR (probes of each gap there: mode:1 2, mode:2 1)', as every output states it."""
        counts = ", ".join(f"{g} {len((self.entry(g) or {'probes': []})['probes'])}" for g in self.keys)
        return f"probe ledger {self.root} (probes of each gap there: {counts})"

    @contextmanager
    def _locked(self) -> Iterator[None]:
        self.root.mkdir(parents=True, exist_ok=True)
        with (self.root / LOCK).open("a") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)  # two probes of one gap at once take different numbers
            try:
                yield
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)


def _write(path: Path, entry: dict[str, Any]) -> None:
    """Written whole, then renamed over the old file: a crash leaves the old entry or the new one."""
    temp = path.with_suffix(".json.tmp")
    temp.write_text(json.dumps(entry, indent=1), encoding="utf-8")
    os.replace(temp, path)


def open_ledger(rows: Path, gaps: list[Gap], rules: Mapping[str, Mapping[int, float]], root: Path | None) -> Ledger:
    """The ledger of a probe of `gaps` over the run's `rows`."""
    digest = rows_digest(rows)
    return Ledger(ledger_dir(root), {g.gap_id: gap_key(digest, g, rules[g.gap_id]) for g in gaps})
