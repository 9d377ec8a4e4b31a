"""Whether other readers (SAEs) find a run's findings again on the same rows (`cg-ray sensitivity`, issues #51,
#59), as the CLI, the explorer, report.html and the API show it: beside each failure mode and confirmed concept
a line such as "other readers: l20-seed7 ✓, l13 ~, l20-w2304 ✗", and a section "Does another reader find the
same?".

The other readers read the run's own rows with its scores and splits: a finding they find again is robust to
the reader, not replicated. So the section shows each overlap beside the overlap chance gives, a near miss
beside a finding not found (the other reader's best q for rows like these), the slices apart (metadata rules
every reader finds), and, where the run was probed, which findings were confirmed on new items: the
replication. Read from the run's sensitivity/ and probe/ files through `RunDir` only: the report sits below
cg_ray.sensitivity in the layers, so the statuses come as findings.parquet stores them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

from cg_ray import schemas as S
from cg_ray.artifacts import layout as L
from cg_ray.artifacts.layout import RunDir
from cg_ray.artifacts.probe import read_probe_results
from cg_ray.artifacts.renamed import sensitivity_findings
from cg_ray.report.findings import q_text
from cg_ray.report.probe import standing_attempts

# How each status is marked after a reader's name (the statuses: cg_ray.schemas.READER_STATUSES).
MARKS: Final = {S.FOUND: "✓", S.PARTLY: "~", S.NOT_FOUND: "✗"}
MARKS_TEXT: Final = "on the same rows: ✓ found by that reader, ~ partly, ✗ not found"
# The profile files whose entries findings.parquet compares, and how an entry is keyed there (as `--gap` takes).
# Slices are compared too, but every reader finds a metadata rule: nothing is said beside them.
KEYED: Final = {"failure_modes": "mode", "weaknesses": "concept", "strengths": "concept"}
SLICE: Final = "slice"
FINDINGS_SHOWN: Final = 60  # in the report's section (all are in sensitivity/findings.parquet)


@dataclass(frozen=True)
class Sensitivity:
    """sensitivity/ of a run: summary.json as written, findings.parquet (under format 2's names) and
    pairs.parquet as lists of rows."""

    summary: dict[str, Any]
    findings: list[dict[str, Any]]  # one per (finding of the run, other reader)
    pairs: list[dict[str, Any]]  # one per (the run's reader, other reader)

    @property
    def readers(self) -> list[str]:
        """The other readers in the summary's order, then any only findings.parquet names (in its order): the
        order every "other readers" line lists them in, so lines compare at a glance."""
        named = [str(r["name"]) for r in self.summary.get("readers") or []]
        return list(dict.fromkeys([*named, *(str(f["reader"]) for f in self.findings)]))

    def statuses(self, finding: str) -> dict[str, str]:
        """reader -> status of `finding` (a key such as mode:1); empty when it was not compared."""
        return {str(f["reader"]): str(f["status"]) for f in self.findings if f["finding"] == finding}

    def counts(self, reader: str, slices: bool) -> dict[str, int]:
        """How many of the reader's compared findings have each status: the failure modes and concepts, or
        the slices (counted from findings.parquet, so a summary of format 1, which counted both, reads alike)."""
        statuses = [f["status"] for f in self.findings if f["reader"] == reader and (f["kind"] == SLICE) == slices]
        return {s: statuses.count(s) for s in MARKS}


def read_sensitivity(run: RunDir) -> Sensitivity | None:
    """The run's sensitivity/, None when it has none (summary.json is written last: without it the analysis did
    not finish, and half a comparison would read as findings not found)."""
    summary = run.read_json_if_present(L.SENSITIVITY_SUMMARY)
    if summary is None:
        return None
    findings, pairs = run.read_table(L.SENSITIVITY_FINDINGS), run.read_table(L.SENSITIVITY_PAIRS)
    return Sensitivity(
        summary=summary,
        findings=[] if findings is None else sensitivity_findings(findings).to_pylist(),
        pairs=[] if pairs is None else pairs.to_pylist(),
    )


def finding_key(kind: str, entry: dict[str, Any]) -> str | None:
    """The key findings.parquet names an entry of profile file `kind` by (mode:RANK, concept:ID: a weak or a
    strong concept); None for a kind nothing is said beside (slices, coverage gaps)."""
    prefix = KEYED.get(kind)
    if prefix is None:
        return None
    return f"concept:{int(entry['concept_id'])}" if prefix == "concept" else f"{prefix}:{int(entry['rank'])}"


def other_readers(sensitivity: Sensitivity | None, finding: str | None) -> str | None:
    """'l20-seed7 ✓, l13 ~, l20-w2304 ✗' (`MARKS_TEXT`; readers in the summary's order); None when the run has
    no sensitivity/ or `finding` was not compared, so callers print nothing."""
    if sensitivity is None or finding is None:
        return None
    found = sensitivity.statuses(finding)
    if not found:
        return None
    return ", ".join(f"{r} {MARKS.get(found[r], '?')}" for r in sensitivity.readers if r in found)


def annotate(sensitivity: Sensitivity | None, kind: str, items: list[dict[str, Any]]) -> None:
    """Give each entry of profile `kind` its `other_readers` (None where not compared); nothing is added to a
    run without sensitivity/, so its documents stay as they were."""
    if sensitivity is None or kind not in KEYED:
        return
    for item in items:
        item["other_readers"] = other_readers(sensitivity, finding_key(kind, item))


# ---- the report's section "Does another reader find the same?"


def _signed(x: float | None) -> str:
    return "—" if x is None or x != x else f"{x:+.3f}"


def _share(x: float | None) -> str:
    return "—" if x is None or x != x else f"{100 * x:.0f}%"


def _jaccard(x: float | None) -> str:
    return "—" if x is None or x != x else f"{x:.2f}"


def overlap_text(f: dict[str, Any]) -> str:
    """'mode:2 (Rows with “draw”): Jaccard 0.62 (0.04 by chance), covers 71% of its rows' / 'no confirmed
    finding of this reader overlaps these rows'."""
    if f.get("match") is None:
        return "no confirmed finding of this reader overlaps these rows"
    said = f" ({f['match_description']})" if f.get("match_description") else ""
    chance = "" if f.get("jaccard_by_chance") is None else f" ({_jaccard(f['jaccard_by_chance'])} by chance)"
    covers = _share(f.get("covered"))
    return f"{f['match']}{said}: Jaccard {_jaccard(f.get('jaccard'))}{chance}, covers {covers} of its rows"


def near_text(f: dict[str, Any]) -> str:
    """'its best candidate flagging rows like these: concept:12, q=0.081' / 'no candidate of this reader flags
    rows like these' ('' for a format 1 table, which did not record it)."""
    if "best_q" not in f:
        return ""
    if f.get("best_q") is None:
        return "no candidate of this reader flags rows like these"
    return f"its best candidate flagging rows like these: {f.get('best_q_finding')}, {q_text(f['best_q'])}"


def estimate_text(estimate: float | None) -> str:
    """'the run's own estimate of its rows: -0.180 (on the halves that chose it: not a test)'."""
    return f"the run's own estimate of its rows: {_signed(estimate)} (on the halves that chose it: not a test)"


def fresh_rows(run: RunDir) -> dict[str, str]:
    """finding key -> its standing verdict on new items (`cg-ray probe`: confirmed, refuted, unsettled,
    too_few), for each gap the run's probe tested; empty when it was never probed."""
    results = read_probe_results(run)
    if not results:
        return {}
    return {held.gap_id: held.verdict for held, _ in standing_attempts(list(results))}


def fresh_text(verdict: str | None) -> str:
    if verdict is None:
        return "not tested on fresh rows (cg-ray probe --gap …)"
    return f"on new items (cg-ray probe): {verdict}"


def pair_view(p: dict[str, Any]) -> dict[str, Any]:
    """One pairs.parquet row with the figures said as the section shows them (the numbers kept beside)."""
    shared = " / ".join(_share(p.get(c)) for c in ("shared_05", "shared_07", "shared_09"))
    return {
        **p,
        "layers": f"{p['layer_a']} → {p['layer_b']}",
        "widths": f"{p['d_sae_a']:,} → {p['d_sae_b']:,}",
        "shared": shared,
        "confirmed": f"{p['confirmed_a']:,} → {p['confirmed_b']:,}",
    }


def _counts_text(counts: dict[str, int]) -> str:
    return ", ".join(f"{counts.get(st, 0):,} {st}" for st in MARKS)


def _fresh_summary(findings: list[dict[str, Any]]) -> str:
    """'on fresh rows (cg-ray probe): 1 of 2 probed confirmed' / 'none tested on fresh rows …'."""
    probed = [f for f in findings if f["kind"] != SLICE and f["fresh_rows"] is not None]
    if not probed:
        return "none tested on fresh rows: replication needs new items (cg-ray probe RUN --gap mode:N)"
    confirmed = sum(1 for f in probed if f["fresh_rows"] == "confirmed")
    return f"on fresh rows (cg-ray probe): {confirmed} of {len(probed)} probed confirmed"


def sensitivity_view(run: RunDir) -> dict[str, Any] | None:
    """{reader, rule, marks, readers, pairs, findings: [{kind, finding, description, n_rows, own_estimate,
    fresh_rows, other_readers, readers: [{reader, status, mark, overlap, near, …}]}], slices: [the same],
    fresh, total}; None without sensitivity/. Findings are the failure modes and concepts; slices apart."""
    s = read_sensitivity(run)
    if s is None:
        return None
    probed = fresh_rows(run)
    order = {name: i for i, name in enumerate(s.readers)}
    grouped: dict[str, dict[str, Any]] = {}
    for f in s.findings:
        entry = grouped.setdefault(
            f["finding"],
            {k: f[k] for k in ("kind", "finding", "description", "n_rows")}
            | {"own_estimate": f.get("own_estimate"), "estimate_text": estimate_text(f.get("own_estimate"))}
            | {"fresh_rows": probed.get(f["finding"]), "readers": []},
        )
        entry["fresh_text"] = fresh_text(entry["fresh_rows"])
        mark = MARKS.get(f["status"], "?")
        entry["readers"].append({**f, "mark": mark, "overlap": overlap_text(f), "near": near_text(f)})
    for entry in grouped.values():
        entry["readers"].sort(key=lambda r: order[str(r["reader"])])
        entry["other_readers"] = other_readers(s, entry["finding"])
    findings = [e for e in grouped.values() if e["kind"] != SLICE]
    slices = [e for e in grouped.values() if e["kind"] == SLICE]
    readers = [
        {
            **r,
            "statuses": s.counts(str(r["name"]), slices=False),
            "statuses_text": _counts_text(s.counts(str(r["name"]), slices=False)),
            "slices_text": _counts_text(s.counts(str(r["name"]), slices=True)),
        }
        for r in s.summary.get("readers") or []
    ]
    return {
        "reader": s.summary.get("reader") or {},
        "rule": s.summary.get("rule") or "",
        "marks": MARKS_TEXT,
        "readers": readers,
        "pairs": [pair_view(p) for p in s.pairs],
        "findings": findings[:FINDINGS_SHOWN],
        "slices": slices[:FINDINGS_SHOWN],
        "fresh": _fresh_summary(findings),
        "total": len(findings),
    }
