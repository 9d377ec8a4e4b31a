"""Open LLM Leaderboard details: per-sample records of the evaluation harness (``--log_samples``: ``doc_id``,
``doc``, ``target``, ``arguments``, ``resps``, ``filtered_resps``, ``<metric>``) stored as Parquet, mapped as
the lm-eval JSONL is (`cg_ray.benchmarks.lm_eval`): Parquet structs read as the JSON objects they were."""

from __future__ import annotations

from collections.abc import Iterator

from cg_ray.benchmarks.lm_eval import load_samples
from cg_ray.benchmarks.rows import BenchmarkRow
from cg_ray.benchmarks.sources import LeaderboardSource


def load_leaderboard(source: LeaderboardSource) -> Iterator[BenchmarkRow]:
    return load_samples(source, "parquet")
