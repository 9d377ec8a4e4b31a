"""Which reader read some rows, as the rows record it: one typed model, built in one place.

Two documents record a reader. `cg-ray run` writes `manifest.json` in the run directory: the reader config
it was given (`config.reader`), the factory that built it, d_sae and each reader actor's SAE fingerprint
(`reader`). `cg-ray extract` writes `ROWS.manifest.json` beside its rows: the resolved reader
(`ConceptReader.describe()`: model, layer, dtype, the SAE's spec / source / architecture / fingerprint, the
token policy), the text mode and the chat template. A manifest holding only post-publish steps (a run made
by `cg-ray metrics`) does not stand for the reader.

`RecordedReader` is what either says, with None for what it does not; an unknown reader carries the reason.
describe (to re-read rows), compare (are two runs' concept ids the same concepts?), the shipped labels (is the
SAE on disk still the one that read the rows?) and skills (which SAE the concept matrix was read with) all
read it from here.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, TypedDict, cast

from cg_ray import schemas as S
from cg_ray.activations.config import DEFAULT_READER_FACTORY
from cg_ray.artifacts.contract import ExtractManifest, RunManifest, read_mapping
from cg_ray.artifacts.layout import RunDir
from cg_ray.config import canonical_text_mode


class SaeRecordDict(TypedDict, total=False):
    """`SaeRecord.as_dict()`: the recorded fields only (None ones left out)."""

    spec: str
    backend: str
    source: str
    architecture: str
    d_in: int
    d_sae: int
    weights_sha256: str


@dataclass(frozen=True)
class SaeRecord:
    """The SAE as recorded (the keys of an extract manifest's `reader.sae`)."""

    spec: str | None = None
    backend: str | None = None
    source: str | None = None
    architecture: str | None = None
    d_in: int | None = None
    d_sae: int | None = None
    weights_sha256: str | None = None  # fingerprint: an SAE retrained in place keeps its spec and folder

    @classmethod
    def from_mapping(cls, sae: Mapping[str, Any]) -> SaeRecord:
        return cls(**{k: sae.get(k) for k in cls.__dataclass_fields__})

    def as_dict(self) -> SaeRecordDict:
        """The recorded fields only (what skills.json / estimate.json keep)."""
        # asdict of this dataclass, its None fields dropped: what SaeRecordDict states
        return cast(SaeRecordDict, {k: v for k, v in asdict(self).items() if v is not None})


@dataclass(frozen=True)
class RecordedReader:
    """The reader of some rows as a manifest records it. `source` is that manifest; None = unknown, and
    `unknown` then says why."""

    source: Path | None
    kind: str  # "run" (manifest.json), "extract" (ROWS.manifest.json) or "unknown"
    sae: SaeRecord = field(default_factory=SaeRecord)
    factory: str | None = None  # "module:attr" that built the reader; None when the manifest does not say
    model: str | None = None  # as given (run) or resolved (extract): a catalog name or a local path
    layer: int | None = None
    dtype: str | None = None
    text: str | None = None  # prompt | response | prompt_response (`both` of older manifests canonicalised)
    chat_template: bool = False
    # The ReaderConfig fields that rebuild the reader (describe re-reads rows); None with `config_missing`
    # when the manifest lacks one.
    config: Mapping[str, Any] | None = None
    config_missing: str | None = None
    unknown: str | None = None

    @property
    def known(self) -> bool:
        return self.source is not None

    @property
    def d_sae(self) -> int | None:
        return self.sae.d_sae

    @property
    def real_reader(self) -> bool:
        """Read by the real reader (a stand-in reader of tests has its own concept space)."""
        return (self.factory or DEFAULT_READER_FACTORY) == DEFAULT_READER_FACTORY

    @classmethod
    def unknown_because(cls, reason: str) -> RecordedReader:
        return cls(None, "unknown", unknown=reason)

    @classmethod
    def from_run_manifest(cls, path: Path) -> RecordedReader:
        """manifest.json of `cg-ray run`; a manifest without reader settings gives an unknown reader."""
        data = read_mapping(path, RunManifest)  # a newer format_version is refused, naming the file
        given = dict((data.get("config") or {}).get("reader") or {})
        if not given:
            return cls.unknown_because(f"{path} has no reader settings")
        resolved = data.get("reader") or {}
        actors = resolved.get("actors") or []
        sae = SaeRecord(
            spec=given.get("sae"),
            d_sae=resolved.get("d_sae"),
            weights_sha256=next((a["sae_weights"] for a in actors if a.get("sae_weights")), None),
        )
        text = given.pop("text", None)
        given.pop("resources", None)  # where the reader ran, not how it reads
        return cls(
            path,
            "run",
            sae=sae,
            factory=resolved.get("factory"),
            model=given.get("model"),
            layer=given.get("layer"),
            dtype=given.get("dtype"),
            text=None if text is None else canonical_text_mode(text, warn=False),
            config=given,
        )

    @classmethod
    def from_extract_manifest(cls, path: Path) -> RecordedReader:
        """ROWS.manifest.json of `cg-ray extract` (always the real reader)."""
        data = read_mapping(path, ExtractManifest)  # a newer format_version is refused, naming the file
        r = data.get("reader") or {}
        sae_doc = dict(r.get("sae") or {})
        sae_doc.setdefault("d_sae", data.get("d_sae"))
        config: dict[str, Any] | None = None
        missing = None
        tokens = r.get("tokens") or {}
        try:
            config = {
                "model": r["model"],
                "sae": r["sae"]["spec"],
                "layer": r["layer"],
                "dtype": r["dtype"],
                "max_tokens": r["max_tokens"],
                "padding_side": r.get("padding_side", "right"),
                **{k: tokens[k] for k in ("exclude_bos", "prepend_bos", "sink_positions", "exclude_special_tokens")},
            }
        except (KeyError, TypeError) as exc:
            missing = f"{path} lacks reader setting {exc}"
        text = data.get("text")
        return cls(
            path,
            "extract",
            sae=SaeRecord.from_mapping(sae_doc),
            factory=DEFAULT_READER_FACTORY,
            model=r.get("model"),
            layer=r.get("layer"),
            dtype=r.get("dtype"),
            text=None if text is None else canonical_text_mode(str(text), warn=False),
            chat_template=bool(data.get("chat_template")),
            config=config,
            config_missing=missing,
        )

    @classmethod
    def from_file(cls, path: Path) -> RecordedReader:
        """A manifest named by the user: manifest.json is a run's, anything else an extract manifest."""
        return cls.from_run_manifest(path) if path.name == S.MANIFEST_FILE else cls.from_extract_manifest(path)


def manifest_path(rows: Path) -> Path:
    """Where `cg-ray extract` writes the manifest of ROWS.parquet: ROWS.manifest.json beside it."""
    return rows.with_name(rows.name.removesuffix(".parquet") + ".manifest.json")


def extract_manifest_candidates(run_dir: Path, rows_file: str) -> list[Path]:
    """Where the extract manifest of summary.json's `rows_file` may be: beside it as written, beside it
    relative to the run, beside the run, or in the run."""
    given = Path(rows_file)
    places = [manifest_path(given), manifest_path(run_dir / given), manifest_path(run_dir.parent / given.name)]
    return list(dict.fromkeys([*places, run_dir / manifest_path(given).name]))


def _records_reader(manifest: Path) -> bool:
    return bool((read_mapping(manifest, RunManifest).get("config") or {}).get("reader"))


def reader_of_run(run_dir: Path, rows_file: str | None) -> RecordedReader:
    """The reader of a run directory: its manifest.json when that records one (`cg-ray run`), else the
    extract manifest of the rows file its summary names (`cg-ray extract` + `cg-ray metrics`)."""
    manifest = RunDir(run_dir).manifest
    if manifest.is_file() and _records_reader(manifest):
        return RecordedReader.from_run_manifest(manifest)
    if not rows_file:
        return RecordedReader.unknown_because("the run has no manifest saying how its rows were read")
    for candidate in extract_manifest_candidates(run_dir, rows_file):
        if candidate.is_file():
            return RecordedReader.from_extract_manifest(candidate)
    return RecordedReader.unknown_because(f"no extract manifest beside {rows_file}")


def reader_of_rows(rows: Path) -> RecordedReader:
    """The reader of a rows file: the extract manifest beside it, else the manifest.json of the run
    directory it lies in."""
    if manifest_path(rows).is_file():
        return RecordedReader.from_extract_manifest(manifest_path(rows))
    manifest = RunDir(rows.parent).manifest
    if manifest.is_file():
        return RecordedReader.from_run_manifest(manifest)
    return RecordedReader.unknown_because(
        f"no extract manifest or manifest.json beside {rows}, so its reader is unknown"
    )


def reader_of_extract(rows: Path) -> RecordedReader:
    """The reader named by the extract manifest beside `rows` only (the concept rows of `cg-ray skills`)."""
    path = manifest_path(rows)
    if not path.is_file():
        return RecordedReader.unknown_because(f"no extract manifest beside {rows}")
    return RecordedReader.from_extract_manifest(path)
