"""The explainer and the judge of `cg-ray explain`: an OpenAI-compatible endpoint (`describe/endpoint.py`) or
the project's generation backend (vLLM on `ray.data`), both behind `complete(prompts, max_tokens)`, and both
checked before any work."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from cg_ray.describe.config import ExplainConfig
from cg_ray.describe.judging import Completer
from cg_ray.describe.saved import SavedAnswers
from cg_ray.errors import ConfigError
from cg_ray.io.blocks import arrow_dataset

__all__ = ["BackendCompleter", "Completer", "backend_generation", "check_model", "close", "make_completer"]


def check_model(config: ExplainConfig) -> None:
    """Fail before any work when the explainer cannot be loaded (or its endpoint cannot be used)."""
    if config.endpoint:
        from cg_ray.describe.endpoint import EndpointCompleter

        completer = EndpointCompleter(config)
        try:
            completer.check()
        finally:
            completer.close()
        return
    from cg_ray.generation import GENERATORS

    if config.backend not in GENERATORS:
        raise ConfigError(GENERATORS.unknown_message(config.backend))
    if config.backend == "fake":
        return
    from cg_ray.catalog import KNOWN_MODELS, resolve_model

    try:
        path = resolve_model(config.model)
        if config.model not in KNOWN_MODELS:
            from transformers import AutoConfig

            AutoConfig.from_pretrained(str(path))
    except Exception as exc:  # any loading failure is reported the same way, up front
        raise ConfigError(f"explainer model {config.model!r} cannot be loaded: {exc}") from None


def backend_generation(config: ExplainConfig, max_tokens: int) -> Any:
    """The `GenerationConfig` of the explainer's backend: greedy, seeded; `engine` / `resources` override."""
    from cg_ray.generation.config import GenerationConfig

    return GenerationConfig.model_validate(
        {
            "backend": config.backend,
            "model": config.model,
            "sampling": {"max_tokens": max_tokens, "temperature": 0.0, "seed": config.seed},
            "engine": {"dtype": config.dtype, "max_model_len": 2048, **config.engine},
            "resources": {"num_cpus": 1, "batch_size": 32, **config.resources},
        }
    )


class BackendCompleter:
    """Prompts through the generation backend (`cg_ray.generation`) on a local Ray instance."""

    def __init__(self, config: ExplainConfig) -> None:
        self.config = config

    def complete(self, prompts: Sequence[str], max_tokens: int) -> list[str]:
        from cg_ray.benchmarks.rows import make_row, rows_table
        from cg_ray.generation import make_generator

        if not prompts:
            return []
        gen = backend_generation(self.config, max_tokens)
        from cg_ray.generation.local_ray import join_or_start_ray

        # A Ray job's cluster (`ray job submit`, jobs/explain_gpu.yaml), else a local one as `cg-ray run` starts
        join_or_start_ray(gen, log_to_driver=True)
        rows = [
            make_row(row_id=f"p{i:06d}", benchmark="explain", prompt=p, scorer="exact") for i, p in enumerate(prompts)
        ]
        out = make_generator(gen).generate(arrow_dataset(rows_table(rows)))
        answers = {r["row_id"]: r["response"] or "" for r in out.take_all()}
        return [answers[f"p{i:06d}"] for i in range(len(prompts))]


def make_completer(config: ExplainConfig, role: str = "explainer", saved: SavedAnswers | None = None) -> Completer:
    """The explainer (or the judge), checked before any work: the endpoint answers `GET /models`, or the
    model loads. An endpoint's answers are taken from `saved` when there and saved to it as they arrive."""
    if config.endpoint:
        from cg_ray.describe.endpoint import EndpointCompleter

        completer = EndpointCompleter(config, role=role)
        completer.check()
        completer.saved = saved
        return completer
    check_model(config)
    return BackendCompleter(config)


def close(*completers: object) -> None:
    for c in completers:
        fn = getattr(c, "close", None)
        if callable(fn):
            fn()
