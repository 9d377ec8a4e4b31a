"""Per-token activations for `cg-ray describe`: pooled, they equal the reader's s̃; offsets locate tokens."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from cg_ray.activations.reader import ConceptReader
from cg_ray.activations.token_detail import read_tokens
from cg_ray.errors import InputError

from .conftest import reader_config

TEXTS = [
    "the cat eats eggs every morning and the dog sells fish at the market",
    "how many ducks",
    "two big trees by the river in the old city and a small house with a green door",
]


@pytest.mark.parametrize("sinks", [0, 2])
def test_pooled_token_activations_equal_the_readers_s_tilde(
    tiny_model_dir: Path, tiny_sae_dir: Callable[..., Path], sinks: int
) -> None:
    reader = ConceptReader.from_config(
        reader_config(model=str(tiny_model_dir), sae=f"saelens-disk:{tiny_sae_dir('topk')}", sink_positions=sinks)
    )
    rows = reader.read(TEXTS)
    concepts = np.arange(reader.d_sae)
    details = read_tokens(reader, TEXTS, concepts)
    any_active = False
    for row, detail in zip(rows, details, strict=True):
        dense = np.zeros(reader.d_sae)
        dense[row.concept_ids] = row.concept_acts
        np.testing.assert_allclose(detail.pooled(), dense, rtol=1e-4, atol=1e-6)
        assert int(detail.counted.sum()) == row.n_tokens
        # the BOS (and the sink positions) never count and carry no activation
        assert not detail.counted[: max(1, sinks)].any() and not detail.acts[: max(1, sinks)].any()
        any_active |= bool(detail.acts.any())
    assert any_active


def test_offsets_point_at_the_tokens_in_the_text(tiny_model_dir: Path, tiny_sae_dir: Callable[..., Path]) -> None:
    reader = ConceptReader.from_config(
        reader_config(model=str(tiny_model_dir), sae=f"saelens-disk:{tiny_sae_dir('topk')}")
    )
    (detail,) = read_tokens(reader, [TEXTS[1]], [0, 5])
    assert detail.offsets[0] == (0, 0) and detail.tokens[0] == ""  # the BOS the tokenizer added
    assert detail.tokens[1:] == ["how", "many", "ducks"]
    assert detail.acts.shape == (4, 2)
    with pytest.raises(InputError, match="d_sae"):
        read_tokens(reader, TEXTS[:1], [reader.d_sae])


@pytest.mark.usefixtures("reader_commands")
def test_describe_rereads_the_top_rows_of_an_extracted_run(
    tmp_path: Path, tiny_model_dir: Path, tiny_sae_dir: Callable[..., Path]
) -> None:
    import json

    from cg_ray import cli
    from cg_ray.artifacts.layout import RunDir
    from cg_ray.describe.outputs import read_descriptions, read_themes

    words = ["cat", "dog", "eggs", "market", "river", "house", "green", "money"]
    rows = [
        {
            "id": f"q{i}",
            "benchmark": "toy",
            "score": float(i % 3 == 0),
            "prompt": f"the {words[i % 8]} and the {words[(i * 3) % 8]} sells {words[(i * 5) % 8]} every morning",
            "metadata": {"kind": "even" if i % 2 == 0 else "odd"},
        }
        for i in range(40)
    ]
    inp = tmp_path / "rows.jsonl"
    inp.write_text("".join(json.dumps(r) + "\n" for r in rows))
    reader = ["--reader-model", str(tiny_model_dir), "--sae", f"saelens-disk:{tiny_sae_dir('topk')}"]
    assert (
        cli.main(
            ["extract", "--input", str(inp), "--out", str(tmp_path / "rows.parquet"), *reader, "--dtype", "float32"]
        )
        == 0
    )
    run = tmp_path / "run"
    assert cli.main(["metrics", "--rows", str(tmp_path / "rows.parquet"), "--out", str(run), "--min-rows", "3"]) == 0
    assert cli.main(["describe", str(run), "--top", "3"]) == 0
    detail = (read_themes(RunDir(run)) or {})["summary"]["token_detail"]
    assert detail["available"] is True and detail["max_rel_diff_vs_stored_s_tilde"] < 1e-4
    described = read_descriptions(RunDir(run)) or []
    spans = [e for d in described for e in d["examples"] if e["span_start"] is not None]
    assert spans and all(0 <= e["span_start"] < e["span_end"] <= len(e["snippet"]) for e in spans)
    assert all(d["top_tokens"] for d in described)
    # every highlighted span is a run of whole words of the row's text
    assert all(e["snippet"][e["span_start"] : e["span_end"]].strip() for e in spans)
