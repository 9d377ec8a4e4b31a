"""The run-directory contract: versioned JSON documents, checked when read."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cg_ray.artifacts.contract import FORMAT_VERSION, ArenaSummary, write_document
from cg_ray.artifacts.layout import read_arena_summary, read_summary
from cg_ray.errors import InputError

ARENA = {"config": {}, "models": {"m/a": "m_a"}, "row_counts": {}, "seconds": 1.5}


def test_documents_are_written_with_their_version_first(tmp_path: Path) -> None:
    written = write_document(tmp_path / "arena.json", ArenaSummary, ARENA)
    assert next(iter(json.loads((tmp_path / "arena.json").read_text()))) == "format_version"
    assert written["format_version"] == FORMAT_VERSION
    assert read_arena_summary(tmp_path).models == {"m/a": "m_a"}


def test_a_newer_version_is_refused_clearly(tmp_path: Path) -> None:
    (tmp_path / "arena.json").write_text(json.dumps({**ARENA, "format_version": FORMAT_VERSION + 1}))
    with pytest.raises(InputError, match="newer than this cg_ray reads"):
        read_arena_summary(tmp_path)


def test_unversioned_documents_still_read_and_bad_ones_do_not(tmp_path: Path) -> None:
    (tmp_path / "arena.json").write_text(json.dumps(ARENA))  # written before format_version existed
    assert read_arena_summary(tmp_path).format_version == 0
    (tmp_path / "summary.json").write_text(json.dumps({"d_sae": "wide"}))
    with pytest.raises(InputError, match=r"summary\.json"):
        read_summary(tmp_path)


def test_writing_checks_the_document(tmp_path: Path) -> None:
    with pytest.raises(ValueError):
        write_document(tmp_path / "arena.json", ArenaSummary, {**ARENA, "models": ["not", "a", "mapping"]})
    assert not (tmp_path / "arena.json").exists()
