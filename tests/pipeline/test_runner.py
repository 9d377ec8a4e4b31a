"""`cg-ray run` end to end on Ray Data: fake generation and a fake reader (same interfaces), real Ray."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from cg_ray import schemas as S
from cg_ray.pipeline.config import parse_run_config
from cg_ray.pipeline.runner import RunOptions, run

FAKE_READER = "cg_ray.testing.fakes:HashingReader.from_config"


def config_dict(out: Path, name: str = "t", per_kind: int = 12) -> dict:
    return {
        "name": name,
        "output_dir": str(out),
        "benchmarks": [
            {"kind": "probes", "per_kind": per_kind, "seed": 0, "kinds": ["arithmetic", "letter_count", "ordering"]}
        ],
        "generation": {"backend": "fake", "resources": {"num_cpus": 0.5, "batch_size": 8}},
        "reader": {"resources": {"num_cpus": 0.5, "min_actors": 1, "max_actors": 1, "batch_size": 8}},
        "metrics": {"min_rows": 1},
    }


def comparable(run_dir: Path) -> dict:
    """Everything a run publishes that must not depend on how it was computed (timings excluded)."""
    summary = json.loads((run_dir / S.SUMMARY_FILE).read_text())
    return {
        "rows": pq.read_table(run_dir / S.ROWS_FILE).drop_columns(["score_status"]).to_pylist(),
        "concepts": pq.read_table(run_dir / S.CONCEPTS_FILE).to_pylist(),
        "pairs": pq.read_table(run_dir / S.BENCHMARK_CONCEPTS_FILE).to_pylist(),
        "summary": {k: v for k, v in summary.items() if k != "timings_s"},
    }


def test_run_publishes_a_complete_run_directory(ray_module, tmp_path: Path) -> None:
    config = parse_run_config(config_dict(tmp_path))
    out = run(config, RunOptions(shard_rows=10, reader_factory=FAKE_READER))
    names = {p.name for p in out.iterdir()}
    assert {
        S.ROWS_FILE,
        S.CONCEPTS_FILE,
        S.BENCHMARK_CONCEPTS_FILE,
        S.SUMMARY_FILE,
        "manifest.json",
        "report.html",
        *S.PROFILE_FILES,
    } <= names
    rows = pq.read_table(out / S.ROWS_FILE)
    assert rows.num_rows == 36
    assert rows.schema.metadata[S.D_SAE_METADATA_KEY] == b"256"
    assert (
        set(rows["benchmark"].to_pylist()) == {"probe_arithmetic", "probe_letter_count", "probe_ordering"}
        or len(set(rows["benchmark"].to_pylist())) == 3
    )
    scores = rows["score"].to_pylist()
    assert all(s in (0.0, 1.0) for s in scores) and 0 < sum(scores) < len(scores)
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["counts"]["rows"] == 36 and manifest["counts"]["shards"] == 4
    assert sum(manifest["counts"]["rows_per_reader_node"].values()) == 36
    assert set(manifest["stages"]) == {"load", "generate+score+read", "metrics"}
    assert not (tmp_path / "t.partial").exists()
    # Row order is input order, whatever order the stream delivered shards in.
    assert rows["row_id"].to_pylist() == sorted(rows["row_id"].to_pylist(), key=rows["row_id"].to_pylist().index)
    # The loaders' metadata is kept (a JSON object per row), and the run describes itself (describe: on).
    assert all(isinstance(json.loads(m), dict) for m in rows[S.METADATA].to_pylist())
    described = pq.read_table(out / "descriptions.parquet")
    assert described.num_rows > 0 and all(described["description"].to_pylist())
    themes = json.loads((out / "themes.json").read_text())
    assert themes["summary"]["token_detail"]["available"] is False  # a stand-in reader: no re-read
    assert "stand-in reader" in themes["summary"]["token_detail"]["reason"]
    assert not (out / "explanations.parquet").exists()  # explain: is off unless configured
    assert "Readable gaps" in (out / "report.html").read_text()  # the report was rebuilt with them


def test_run_with_explain_configured_scores_explanations(ray_module, tmp_path: Path) -> None:
    data = config_dict(tmp_path) | {
        "describe": {"top": 2, "examples": 3},
        "explain": {"backend": "fake", "n_detect": 2},
    }
    out = run(parse_run_config(data), RunOptions(shard_rows=40, reader_factory=FAKE_READER))
    explained = pq.read_table(out / "explanations.parquet").to_pylist()
    assert explained and {r["source"] for r in explained} >= {"llm"}
    assert all(r["model"] == "smollm2-135m-instruct" for r in explained)
    assert (out / "descriptions.parquet").is_file() and (out / "themes.json").is_file()


def test_describe_and_explain_settings_are_validated(tmp_path: Path) -> None:
    from cg_ray.errors import ConfigError

    with pytest.raises(ConfigError, match=r"describe\.top"):
        parse_run_config(config_dict(tmp_path) | {"describe": {"top": 0}})
    with pytest.raises(ConfigError, match=r"explain\.n_detect"):
        parse_run_config(config_dict(tmp_path) | {"explain": {"n_detect": 0}})
    assert parse_run_config(config_dict(tmp_path) | {"describe": {"enabled": False}}).describe.enabled is False
    # an explainer that cannot load stops the run before any work (nothing is written)
    config = parse_run_config(config_dict(tmp_path) | {"explain": {"model": str(tmp_path / "no-such-model")}})
    with pytest.raises(ConfigError, match=r"explainer model .* cannot be loaded"):
        run(config, RunOptions(reader_factory=FAKE_READER))
    assert list(tmp_path.iterdir()) == []


def test_bad_config_and_scorer_that_parses_nothing(ray_module, tmp_path: Path) -> None:
    from cg_ray.errors import ConfigError
    from cg_ray.scoring.apply import ScoringError

    with pytest.raises(ConfigError, match="benchmarks"):
        parse_run_config({**config_dict(tmp_path), "benchmarks": []})
    with pytest.raises(ConfigError, match="typo"):
        parse_run_config({**config_dict(tmp_path), "typo": 1})
    bench = tmp_path / "b.jsonl"
    bench.write_text("".join(json.dumps({"id": i, "prompt": f"q{i}", "reference": "42"}) + "\n" for i in range(8)))
    cfg = config_dict(tmp_path, name="numeric")
    cfg["benchmarks"] = [{"kind": "local", "path": str(bench), "benchmark": "b", "scorer": "multiple_choice"}]
    with pytest.raises(ScoringError, match="could not parse any"):
        run(parse_run_config(cfg), RunOptions(shard_rows=4, reader_factory=FAKE_READER))
    assert not (tmp_path / "numeric").exists()
