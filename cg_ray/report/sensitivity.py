"""Whether a run's findings hold whichever SAE reads the rows (`cg-ray sensitivity`, issue #51), as the CLI,
the explorer, report.html and the API show it: beside each failure mode, slice and confirmed concept a line such as
"holds under: l20-seed7 ✓, l13 ~, l20-w2304 ✗", and a section "Does another reader find the same?".

A finding read through one SAE may be that SAE's, not the model's; another reader finding the same rows is
the evidence it is not. Read from the run's sensitivity/ files through `RunDir` only: the report sits below
cg_ray.sensitivity in the layers, so the statuses come as findings.parquet stores them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

from cg_ray import schemas as S
from cg_ray.artifacts import layout as L
from cg_ray.artifacts.layout import RunDir

# How each status is marked after a reader's name (the statuses: cg_ray.schemas.REPLICATION_STATUSES).
MARKS: Final = {S.REPLICATES: "✓", S.PARTLY: "~", S.NOT_FOUND: "✗"}
# The profile files whose entries findings.parquet compares, and how an entry is keyed there (as `--gap` takes).
KEYED: Final = {"failure_modes": "mode", "slices": "slice", "weaknesses": "concept", "strengths": "concept"}
FINDINGS_SHOWN: Final = 60  # in the report's section (all are in sensitivity/findings.parquet)


@dataclass(frozen=True)
class Sensitivity:
    """sensitivity/ of a run: summary.json as written, findings.parquet and pairs.parquet as lists of rows."""

    summary: dict[str, Any]
    findings: list[dict[str, Any]]  # one per (finding of the run, other reader)
    pairs: list[dict[str, Any]]  # one per (the run's reader, other reader)

    @property
    def readers(self) -> list[str]:
        """The other readers in the summary's order, then any only findings.parquet names (in its order): the
        order every "holds under" line lists them in, so lines compare at a glance."""
        named = [str(r["name"]) for r in self.summary.get("readers") or []]
        return list(dict.fromkeys([*named, *(str(f["reader"]) for f in self.findings)]))

    def statuses(self, finding: str) -> dict[str, str]:
        """reader -> status of `finding` (a key such as mode:1); empty when it was not compared."""
        return {str(f["reader"]): str(f["status"]) for f in self.findings if f["finding"] == finding}


def read_sensitivity(run: RunDir) -> Sensitivity | None:
    """The run's sensitivity/, None when it has none (summary.json is written last: without it the analysis did
    not finish, and half a comparison would read as findings that do not replicate)."""
    summary = run.read_json_if_present(L.SENSITIVITY_SUMMARY)
    if summary is None:
        return None
    findings, pairs = run.read_table(L.SENSITIVITY_FINDINGS), run.read_table(L.SENSITIVITY_PAIRS)
    return Sensitivity(
        summary=summary,
        findings=[] if findings is None else findings.to_pylist(),
        pairs=[] if pairs is None else pairs.to_pylist(),
    )


def finding_key(kind: str, entry: dict[str, Any]) -> str | None:
    """The key findings.parquet names an entry of profile file `kind` by (mode:RANK, slice:RANK, concept:ID:
    a weak or a strong concept); None for a kind it does not compare (coverage gaps)."""
    prefix = KEYED.get(kind)
    if prefix is None:
        return None
    return f"concept:{int(entry['concept_id'])}" if prefix == "concept" else f"{prefix}:{int(entry['rank'])}"


def holds_under(sensitivity: Sensitivity | None, finding: str | None) -> str | None:
    """'l20-seed7 ✓, l13 ~, l20-w2304 ✗' (✓ replicates, ~ partly, ✗ not found; readers in the summary's
    order); None when the run has no sensitivity/ or `finding` was not compared, so callers print nothing."""
    if sensitivity is None or finding is None:
        return None
    found = sensitivity.statuses(finding)
    if not found:
        return None
    return ", ".join(f"{r} {MARKS.get(found[r], '?')}" for r in sensitivity.readers if r in found)


def annotate(sensitivity: Sensitivity | None, kind: str, items: list[dict[str, Any]]) -> None:
    """Give each entry of profile `kind` its `holds_under` (None where not compared); nothing is added to a run
    without sensitivity/, so its documents stay as they were."""
    if sensitivity is None or kind not in KEYED:
        return
    for item in items:
        item["holds_under"] = holds_under(sensitivity, finding_key(kind, item))


# ---- the report's section "Does another reader find the same?"


def _signed(x: float | None) -> str:
    return "—" if x is None or x != x else f"{x:+.3f}"


def _share(x: float | None) -> str:
    return "—" if x is None or x != x else f"{100 * x:.0f}%"


def overlap_text(f: dict[str, Any]) -> str:
    """'mode:2 (Rows with “draw”): Jaccard 0.62, covers 71% of its rows' / 'no confirmed finding of it
    overlaps these rows'."""
    if f.get("match") is None:
        return "no confirmed finding of this reader overlaps these rows"
    said = f" ({f['match_description']})" if f.get("match_description") else ""
    jaccard = "—" if f.get("jaccard") is None else f"{f['jaccard']:.2f}"
    return f"{f['match']}{said}: Jaccard {jaccard}, covers {_share(f.get('covered'))} of its rows"


def effect_text(f: dict[str, Any]) -> str:
    """'its rows held out under this reader's splits: -0.180 [-0.250, -0.100], confirmed'."""
    verdict = "confirmed" if f.get("effect_confirmed") else "not confirmed"
    interval = f"[{_signed(f.get('effect_low'))}, {_signed(f.get('effect_high'))}]"
    return f"its rows held out under this reader's splits: {_signed(f.get('effect'))} {interval}, {verdict}"


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


def sensitivity_view(run: RunDir) -> dict[str, Any] | None:
    """{reader, rule, readers, pairs, findings: [{kind, finding, description, n_rows, holds_under, readers:
    [{reader, status, mark, overlap, effect_text, …}]}], total}; None without sensitivity/."""
    s = read_sensitivity(run)
    if s is None:
        return None
    order = {name: i for i, name in enumerate(s.readers)}
    grouped: dict[str, dict[str, Any]] = {}
    for f in s.findings:
        entry = grouped.setdefault(
            f["finding"], {k: f[k] for k in ("kind", "finding", "description", "n_rows")} | {"readers": []}
        )
        mark = MARKS.get(f["status"], "?")
        entry["readers"].append({**f, "mark": mark, "overlap": overlap_text(f), "effect_text": effect_text(f)})
    findings = list(grouped.values())
    for entry in findings:
        entry["readers"].sort(key=lambda r: order[str(r["reader"])])
        entry["holds_under"] = holds_under(s, entry["finding"])
    readers = [
        {**r, "statuses_text": ", ".join(f"{(r.get('statuses') or {}).get(st, 0):,} {st}" for st in MARKS)}
        for r in s.summary.get("readers") or []
    ]
    return {
        "reader": s.summary.get("reader") or {},
        "rule": s.summary.get("rule") or "",
        "readers": readers,
        "pairs": [pair_view(p) for p in s.pairs],
        "findings": findings[:FINDINGS_SHOWN],
        "total": len(findings),
    }
