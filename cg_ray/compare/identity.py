"""Which reader and SAE read a run's rows: concept ids of two runs correspond only when both are the same.

A run records its reader in one of two places: `manifest.json` (`cg-ray run`: the reader config and the
reader factory) or the extract manifest beside the rows file named in summary.json (`cg-ray extract` +
`cg-ray metrics`: the resolved reader, with the SAE's source and architecture); both are read as one
`cg_ray.activations.recorded.RecordedReader`. `d_sae` is always known (summary.json). Two identities are
compared on every field both know; a field only one of them knows is not evidence either way (an SAE
retrained in place keeps its spec and path; only its weights' fingerprint, when both record it, tells it
apart) — the comparison says which fields it checked.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, SupportsIndex, SupportsInt

from cg_ray.activations.recorded import reader_of_run
from cg_ray.errors import CgRayError

# Fields compared, in the order an error names them.
FIELDS = (
    "d_sae",
    "reader_model",
    "layer",
    "sae",
    "sae_source",
    "sae_architecture",
    "sae_d_in",
    "sae_weights",  # the weights' sha256: an SAE retrained in place keeps its spec and path
    "factory",
)


class ReaderMismatch(CgRayError):
    """Two runs read with different readers / SAEs (or one whose reader is unknown)."""

    def __init__(self, message: str, field: str | None) -> None:
        super().__init__(message)
        self.field = field


@dataclass(frozen=True)
class ReaderIdentity:
    """What a run says about its reader; None = not recorded. `source` names the document it came from."""

    values: dict[str, str | int | None] = field(default_factory=dict)
    source: str | None = None
    text: str | None = None  # which text was read (prompt | response | both), reported, not compared

    @property
    def known(self) -> bool:
        return self.source is not None

    def as_dict(self) -> dict[str, str | int | None]:
        return {"source": self.source, "text": self.text, **{k: self.values.get(k) for k in FIELDS}}


def _name(path: Any) -> str | None:
    """A model / SAE named by a catalog name or by a local path compares by its last component."""
    return None if path in (None, "", "auto") else Path(str(path)).name


def reader_identity(run_dir: Path, summary: Mapping[str, object]) -> ReaderIdentity:
    """The run's reader as recorded (an identity with only d_sae and no source when nothing says more)."""
    recorded_d_sae = summary["d_sae"]
    if not isinstance(recorded_d_sae, str | bytes | SupportsInt | SupportsIndex):  # what int() takes
        raise TypeError(
            "int() argument must be a string, a bytes-like object or a real number, "
            f"not {type(recorded_d_sae).__name__!r}"
        )
    d_sae = int(recorded_d_sae)
    rows_file = summary.get("rows_file")
    recorded = reader_of_run(run_dir, None if not rows_file else str(rows_file))
    if not recorded.known:
        return ReaderIdentity({"d_sae": d_sae}, None, None)
    sae = recorded.sae
    values = {
        "d_sae": d_sae if sae.d_sae is None else sae.d_sae,
        "reader_model": _name(recorded.model),
        "layer": recorded.layer,
        "sae": sae.spec,
        "sae_source": _name(sae.source),
        "sae_architecture": sae.architecture,
        "sae_d_in": sae.d_in,
        "sae_weights": sae.weights_sha256,
        "factory": recorded.factory,
    }
    return ReaderIdentity(values, str(recorded.source), recorded.text)


def check_same_reader(
    a: ReaderIdentity, b: ReaderIdentity, names: tuple[str, str], *, assume_same: bool = False
) -> list[str]:
    """The fields compared; raises `ReaderMismatch` naming both runs and the first field that differs.

    A run whose reader is not recorded is refused unless `assume_same` (the caller vouches for it, e.g. two
    analyses of one service, which has one reader); d_sae is compared in every case.
    """
    checked = []
    for key in FIELDS:
        va, vb = a.values.get(key), b.values.get(key)
        if va is None or vb is None:
            continue
        checked.append(key)
        if va != vb:
            raise ReaderMismatch(
                f"runs read with different readers/SAEs, so their concept ids do not correspond: "
                f"{key} is {va!r} in run A ({names[0]}) but {vb!r} in run B ({names[1]})",
                key,
            )
    unknown = [n for n, ident in zip(names, (a, b), strict=True) if not ident.known]
    if unknown and not assume_same:
        raise ReaderMismatch(
            f"cannot tell which reader/SAE read {' and '.join(unknown)} (no manifest.json, no extract manifest "
            f"beside its rows file); only d_sae was compared. Pass --assume-same-reader if you know both runs "
            f"({names[0]}, {names[1]}) were read by the same reader and SAE",
            "reader",
        )
    return checked
