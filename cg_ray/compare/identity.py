"""Which reader and SAE read a run's rows: concept ids of two runs correspond only when both are the same.

A run records its reader in one of two places: `manifest.json` (`cg-ray run`: the reader config and the
reader factory) or the extract manifest beside the rows file named in summary.json (`cg-ray extract` +
`cg-ray metrics`: the resolved reader, with the SAE's source and architecture). `d_sae` is always known
(summary.json). Two identities are compared on every field both know; a field only one of them knows is
not evidence either way. No weights fingerprint is recorded by the reader, so an SAE retrained in place
(same spec, same source path) cannot be told apart — the comparison says which fields it checked.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cg_ray.artifacts.contract import ExtractManifest, RunManifest, read_mapping
from cg_ray.artifacts.layout import RunDir
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

    values: dict[str, Any] = field(default_factory=dict)
    source: str | None = None
    text: str | None = None  # which text was read (prompt | response | both), reported, not compared

    @property
    def known(self) -> bool:
        return self.source is not None

    def as_dict(self) -> dict[str, Any]:
        return {"source": self.source, "text": self.text, **{k: self.values.get(k) for k in FIELDS}}


def _name(path: Any) -> str | None:
    """A model / SAE named by a catalog name or by a local path compares by its last component."""
    return None if path in (None, "", "auto") else Path(str(path)).name


def _text_mode(text: Any) -> Any:
    return "prompt_response" if text == "both" else text  # older extract manifests spell it `both`


def _from_run_manifest(path: Path, d_sae: int) -> ReaderIdentity:
    data = read_mapping(path, RunManifest)
    reader = (data.get("config") or {}).get("reader") or {}
    resolved = data.get("reader") or {}
    actors = resolved.get("actors") or []
    values = _common(reader, resolved.get("d_sae", d_sae), reader.get("sae"))
    values["factory"] = resolved.get("factory")
    values["sae_weights"] = next((a["sae_weights"] for a in actors if a.get("sae_weights")), None)
    return ReaderIdentity(values, str(path), _text_mode(reader.get("text")))


def _from_extract_manifest(path: Path, d_sae: int) -> ReaderIdentity:
    data = read_mapping(path, ExtractManifest)  # a newer format_version is refused, naming the file
    reader = data.get("reader") or {}
    sae = reader.get("sae") or {}
    values = _common(reader, sae.get("d_sae", d_sae), sae.get("spec"))
    for name, key in (("sae_architecture", "architecture"), ("sae_d_in", "d_in"), ("sae_weights", "weights_sha256")):
        values[name] = sae.get(key)
    values["sae_source"] = _name(sae.get("source"))
    values["factory"] = "cg_ray.activations.reader:ConceptReader.from_config"  # extract always uses the real reader
    return ReaderIdentity(values, str(path), _text_mode(data.get("text")))


def _common(reader: dict[str, Any], d_sae: Any, sae: Any) -> dict[str, Any]:
    """The fields both manifests record: width, reader model (by name), layer, SAE spec."""
    return {"d_sae": d_sae, "reader_model": _name(reader.get("model")), "layer": reader.get("layer"), "sae": sae}


def extract_manifest_candidates(run_dir: Path, rows_file: str) -> list[Path]:
    """Where the extract manifest of `summary.rows_file` may be: as written, or relative to the run."""
    given = Path(rows_file)
    stem = given.name.removesuffix(".parquet") + ".manifest.json"
    places = [given.with_name(stem), run_dir / given.parent / stem, run_dir.parent / stem, run_dir / stem]
    return list(dict.fromkeys(places))


def reader_identity(run_dir: Path, summary: dict[str, Any]) -> ReaderIdentity:
    """The run's reader as recorded (an identity with only d_sae and no source when nothing says more)."""
    d_sae = int(summary["d_sae"])
    manifest = RunDir(run_dir).manifest
    if manifest.is_file() and (read_mapping(manifest, RunManifest).get("config") or {}).get("reader"):
        return _from_run_manifest(manifest, d_sae)  # `cg-ray run` (a manifest of post-publish steps only: on)
    rows_file = summary.get("rows_file")
    if rows_file:
        for candidate in extract_manifest_candidates(run_dir, str(rows_file)):
            if candidate.is_file():
                return _from_extract_manifest(candidate, d_sae)
    return ReaderIdentity({"d_sae": d_sae}, None, None)


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
