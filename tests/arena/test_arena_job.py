"""`cg-ray arena CONFIG` end to end on Ray Data with the hashing fake reader (same interface)."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from cg_ray import schemas as S
from cg_ray.arena.job import ArenaJobConfig, load_arena_config, run_arena
from cg_ray.errors import ConfigError
from tests.report.offline import embedded

from .arena_builders import record, write_jsonl

ROOT = Path(__file__).resolve().parents[2]


def battles(path: Path) -> Path:
    records = []
    for i in range(60):
        # alpha wins two battles in three; words differ by winner so concepts separate wins from losses.
        winner = "model_a" if i % 3 else "model_b"
        a_text = f"alpha {'careful proof' if winner == 'model_a' else 'vague guess'} {i}"
        b_text = f"beta {'careful proof' if winner == 'model_b' else 'vague guess'} {i}"
        records.append(
            record(
                f"q{i}",
                winner=winner,
                conversation_a=[{"role": "user", "content": f"question {i}"}, {"role": "assistant", "content": a_text}],
                conversation_b=[{"role": "user", "content": f"question {i}"}, {"role": "assistant", "content": b_text}],
            )
        )
    return write_jsonl(path, records)


def test_arena_job(ray_module, tmp_path: Path) -> None:
    config = ArenaJobConfig.model_validate(
        {
            "output_dir": str(tmp_path),
            "arena": {
                "battles": str(battles(tmp_path / "b.jsonl")),
                "selection": {"min_battles": 10},
                "ratings": {"bootstrap": 50},
            },
            "reader": {"resources": {"num_cpus": 0.5, "batch_size": 16}},
            "metrics": {"min_rows": 10},  # frequent words only: not the one-row question numbers
        }
    )
    out = run_arena(config, reader_factory="cg_ray.testing.fakes:HashingReader.from_config")
    ratings = json.loads((out / "ratings" / "ratings.json").read_text())
    by_model = {m["model"]: m for m in ratings["models"]}
    assert by_model["alpha"]["bt"] > by_model["beta"]["bt"]
    for model in ("alpha", "beta"):
        rows = pq.read_table(out / "models" / model / S.ROWS_FILE)
        assert rows.num_rows == 60 and rows.schema.metadata[S.D_SAE_METADATA_KEY] == b"256"
        assert (out / "models" / model / "report.html").exists()
        assert all((out / "models" / model / name).exists() for name in S.PROFILE_FILES)
    assert pq.read_table(out / "models" / "alpha" / S.ROWS_FILE)["score"].to_pylist().count(1.0) == 40
    table = pq.read_table(out / "model_concepts.parquet").to_pylist()
    # The word "careful" appears only in won answers: it tops what each model wins on.
    from cg_ray.testing.fakes import word_concept

    careful = word_concept("careful", 256)
    for model in ("alpha", "beta"):
        wins = [r for r in table if r["model"] == model and r["kind"] == "wins"]
        assert careful in [r["concept_id"] for r in wins[:3]]
        # judged as its own run judges it: confirmed on rows that did not choose it, the interval above 0
        won = next(r for r in wins if r["concept_id"] == careful)
        assert won["confirmed"] and won["heldout_residual_low"] > 0 and won["n_heldout"] > 0
        profile = pq.read_table(out / "models" / model / S.STRENGTHS_FILE).to_pylist()
        assert next(e for e in profile if e["concept_id"] == careful)["q_value"] == won["q_value"]
    assert (out / "head_to_head.parquet").exists() and json.loads((out / "arena.json").read_text())["models"]
    # The arena's own page: its ratings drawn by the explorer's app (tests/arena/test_arena_page.py draws it).
    view, doc = embedded(out / "report.html")
    assert view == "arena" and [m["model"] for m in doc["ratings"]] == [m["model"] for m in ratings["models"]]


def test_arena_configs_validate(tmp_path: Path) -> None:
    config = load_arena_config(ROOT / "jobs" / "arena.yaml")
    assert config.arena.selection.min_battles == 100
    bad = tmp_path / "bad.yaml"
    bad.write_text("arena: {battles: x.jsonl, selection: {min_battles: 5}}\ntypo: 1\n")
    with pytest.raises(ConfigError, match="typo"):
        load_arena_config(bad)
    with pytest.raises(ConfigError, match="not found"):
        load_arena_config(tmp_path / "missing.yaml")
