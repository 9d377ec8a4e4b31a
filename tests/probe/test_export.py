"""`export_items`: the items as JSONL, an lm-evaluation-harness task group and an inspect_ai task file, each
loaded by the harness itself (inspect run end to end on its mock model, lm-eval on a canned model), scored
per role; bad input refused with errors naming it; nothing half-written."""

from __future__ import annotations

import importlib.util
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from cg_ray.errors import CgRayError, InputError
from cg_ray.probe import export as export_module
from cg_ray.probe.export import export_items
from cg_ray.probe.items import ItemPair


def pair(gap: str, index: int, scorer: str, target: tuple[str, str], control: tuple[str, str]) -> ItemPair:
    return ItemPair(
        gap_id=gap,
        pair_id=f"{gap}/{index}",
        generator="family:toy",
        request_id=f"req-{gap}",
        seed=index,
        target_prompt=target[0],
        target_reference=target[1],
        control_prompt=control[0],
        control_reference=control[1],
        scorer=scorer,
    )


PAIRS = [
    pair("mode:1", 0, "numeric", ("A box holds 12 eggs. How many eggs in 3 boxes?", "36"), ("2 boxes?", "24")),
    pair(
        "concept:7",
        0,
        "multiple_choice",
        ("Which is a mammal? (A) shark (B) whale", "B"),
        ("Which is a fish? (A) shark (B) whale", "(A)"),
    ),
    pair("concept:9", 0, "exact", ("Capital of France?", "Paris"), ("Capital of Spain?", "Madrid")),
    pair("concept:9", 1, "any_of", ("Name a primary colour.", "red"), ("Name the colour of grass.", "green")),
]
# The model's answer to each prompt: targets wrong but the last, controls right, in varied formats.
ANSWERS = {
    "A box holds 12 eggs. How many eggs in 3 boxes?": "The answer is 35.",
    "2 boxes?": "2 boxes of 12 make 24.",  # the last number is the answer
    "Which is a mammal? (A) shark (B) whale": "The answer is (A).",
    "Which is a fish? (A) shark (B) whale": "I think (A) shark",  # the last lone letter
    "Capital of France?": "Lyon",
    "Capital of Spain?": "Madrid.",
    "Name a primary colour.": "Red",
    "Name the colour of grass.": "green",
}
CORRECT = {  # item id -> right?
    "mode:1/0/target": False,
    "mode:1/0/control": True,
    "concept:7/0/target": False,
    "concept:7/0/control": True,
    "concept:9/0/target": False,
    "concept:9/0/control": True,
    "concept:9/1/target": True,
    "concept:9/1/control": True,
}


def expected_rows(pairs: list[ItemPair]) -> list[dict[str, str]]:
    rows = []
    for p in pairs:
        for role, prompt, ref in (
            ("target", p.target_prompt, p.target_reference),
            ("control", p.control_prompt, p.control_reference),
        ):
            rows.append(
                {
                    "id": f"{p.pair_id}/{role}",
                    "gap_id": p.gap_id,
                    "role": role,
                    "pair_id": p.pair_id,
                    "input": prompt,
                    "target": ref,
                    "scorer": p.scorer,
                }
            )
    return rows


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return export_items(PAIRS, tmp_path_factory.mktemp("export") / "out", name="toy_probe")


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def test_the_items_round_trip_and_only_the_four_files_are_left(exported: dict[str, Path]) -> None:
    assert read_jsonl(exported["items"]) == expected_rows(PAIRS)
    out = exported["items"].parent
    assert sorted(p.name for p in out.iterdir()) == sorted(
        ["items.jsonl", "toy_probe.yaml", "toy_probe_lmeval.py", "toy_probe_inspect.py"]
    )
    assert {k: p.name for k, p in exported.items()} == {
        "items": "items.jsonl",
        "lm_eval": "toy_probe.yaml",
        "lm_eval_docs": "toy_probe_lmeval.py",
        "inspect": "toy_probe_inspect.py",
    }


def test_the_task_files_import_nothing_of_cg_ray(exported: dict[str, Path]) -> None:
    for key in ("inspect", "lm_eval_docs"):
        assert "cg_ray" not in exported[key].read_text(encoding="utf-8")


# --- inspect_ai ---------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def inspect_data(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    pytest.importorskip("inspect_ai")
    root = tmp_path_factory.mktemp("inspect-data")
    old = os.environ.get("XDG_DATA_HOME")
    os.environ["XDG_DATA_HOME"] = str(root)  # inspect keeps its own data under the user's data dir
    try:
        yield root
    finally:
        if old is None:
            os.environ.pop("XDG_DATA_HOME", None)
        else:
            os.environ["XDG_DATA_HOME"] = old


def load_file_module(path: Path) -> Any:
    spec = importlib.util.spec_from_file_location(f"exported_{path.stem}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def mock_answer(input: list[Any], tools: Any, tool_choice: Any, config: Any) -> Any:
    """The canned answer, with its token usage given: mockllm would otherwise count tokens with a tiktoken
    encoding it downloads (no network here)."""
    from inspect_ai.model import ModelOutput, ModelUsage

    out = ModelOutput.from_content(model="mockllm", content=ANSWERS[input[-1].text])
    out.usage = ModelUsage(input_tokens=1, output_tokens=1, total_tokens=2)
    return out


def test_inspect_loads_every_item_with_its_target_and_metadata(exported: dict[str, Path], inspect_data: Path) -> None:
    task = load_file_module(exported["inspect"]).toy_probe()
    samples = {s.id: s for s in task.dataset}
    rows = {r["id"]: r for r in expected_rows(PAIRS)}
    assert set(samples) == set(rows)
    for sid, row in rows.items():
        sample = samples[sid]
        assert (sample.input, sample.target) == (row["input"], row["target"])
        assert sample.metadata == {k: row[k] for k in ("gap_id", "role", "pair_id", "scorer")}


def test_inspect_runs_the_task_end_to_end_and_reports_each_role(exported: dict[str, Path], inspect_data: Path) -> None:
    from inspect_ai import eval as inspect_eval
    from inspect_ai.model import get_model
    from inspect_ai.scorer import value_to_float

    task = load_file_module(exported["inspect"]).toy_probe()
    model = get_model("mockllm/model", custom_outputs=mock_answer)
    (log,) = inspect_eval(task, model=model, log_dir=str(inspect_data / "logs"), display="none")
    assert log.status == "success", log.error
    to_float = value_to_float()
    scores = {s.id: to_float(s.scores["item_scorer"].value) for s in log.samples or []}
    assert scores == {sid: float(ok) for sid, ok in CORRECT.items()}
    assert log.results is not None
    metrics = {name: m.value for name, m in log.results.scores[0].metrics.items()}
    assert metrics["target"] == pytest.approx(0.25) and metrics["control"] == pytest.approx(1.0)


# --- lm-evaluation-harness ----------------------------------------------------------------------------------


def lm_eval_tasks(exported: dict[str, Path]) -> tuple[Any, dict[str, Any]]:
    """lm-eval's own loading of the YAML (its TaskManager): the leaf tasks by name; the group holds a subgroup
    per role, each the tasks of that role."""
    tasks = pytest.importorskip("lm_eval.tasks", reason="lm-eval is not installed (the `lmeval` extra)")
    manager = tasks.TaskManager(include_path=str(exported["lm_eval"].parent))
    loaded = manager.load(["toy_probe"])
    children = {short(g): sorted(short(c) for c in members) for g, members in loaded["group_map"].items()}
    assert children["toy_probe"] == ["toy_probe_control", "toy_probe_target"]
    for role in ("target", "control"):
        assert all(c.startswith(f"toy_probe_{role}_") for c in children[f"toy_probe_{role}"])
    return manager, {short(name): task for name, task in loaded["tasks"].items()}


def short(name: str) -> str:
    return name.rsplit("::", 1)[-1]  # lm-eval names a group's inline members "GROUP::MEMBER"


def test_lm_eval_loads_the_group_and_its_documents_equal_the_items(exported: dict[str, Path]) -> None:
    _, leaves = lm_eval_tasks(exported)
    scorers = ("any_of", "exact", "multiple_choice", "numeric")
    assert sorted(leaves) == sorted(
        f"toy_probe_{role}_{scorer}" for role in ("target", "control") for scorer in scorers
    )
    rows = {(r["role"], r["scorer"]): r for r in expected_rows(PAIRS)}  # one item per role and scorer here
    for name, task in leaves.items():
        role, scorer = name.removeprefix("toy_probe_").split("_", 1)
        (doc,) = list(task.test_docs())
        row = rows[(role, scorer)]
        assert {k: doc[k] for k in row} == row
        assert task.doc_to_text(doc) == row["input"] and task.doc_to_target(doc) == row["target"]
        assert task.config.output_type == "generate_until"
        assert task.config.generation_kwargs["until"] == ["\n"]


def test_lm_eval_scores_canned_answers_per_item_and_per_role(exported: dict[str, Path]) -> None:
    manager, _ = lm_eval_tasks(exported)
    from lm_eval.api.model import LM
    from lm_eval.evaluator import simple_evaluate

    class Canned(LM):  # type: ignore[misc]
        def generate_until(self, requests: list[Any], disable_tqdm: bool = False) -> list[str]:
            return [ANSWERS[r.args[0]] for r in requests]

        def loglikelihood(self, requests: list[Any], disable_tqdm: bool = False) -> list[Any]:
            raise NotImplementedError

        def loglikelihood_rolling(self, requests: list[Any], disable_tqdm: bool = False) -> list[Any]:
            raise NotImplementedError

    out = simple_evaluate(model=Canned(), tasks=["toy_probe"], task_manager=manager, log_samples=True)
    assert out is not None
    per_item = {
        s["doc"]["id"]: s["exact_match"] for samples in out["samples"].values() for s in samples if "exact_match" in s
    }
    assert per_item == {sid: float(ok) for sid, ok in CORRECT.items()}
    results = {short(name): r for name, r in out["results"].items()}
    assert results["toy_probe_target"]["exact_match,answer"] == pytest.approx(0.25)
    assert results["toy_probe_control"]["exact_match,answer"] == pytest.approx(1.0)


# --- bad input, atomicity -----------------------------------------------------------------------------------


def test_no_pairs_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(CgRayError, match="no item pairs to export"):
        export_items([], tmp_path / "out")
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    ("scorer", "message"),
    [("bleu", "unknown scorer 'bleu'"), ("judge", "scorer 'judge' cannot be exported")],
)
def test_a_scorer_the_harnesses_cannot_use_is_named(tmp_path: Path, scorer: str, message: str) -> None:
    bad = pair("mode:2", 0, scorer, ("q", "a"), ("q2", "b"))
    with pytest.raises(InputError, match=message) as err:
        export_items([PAIRS[0], bad], tmp_path)
    assert (err.value.row, err.value.field) == (1, "scorer")
    assert list(tmp_path.iterdir()) == []


def test_exact_match_is_the_registrys_exact(tmp_path: Path) -> None:
    paths = export_items([pair("mode:2", 0, "exact_match", ("q", "a"), ("q2", "b"))], tmp_path)
    assert {row["scorer"] for row in read_jsonl(paths["items"])} == {"exact"}


def test_other_bad_pairs_and_names_are_refused(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="must be a letter") as err:
        export_items([pair("mode:2", 0, "multiple_choice", ("q", "B"), ("q2", "whale"))], tmp_path)
    assert err.value.field == "control_reference"
    with pytest.raises(InputError, match="appears twice"):
        export_items([PAIRS[0], PAIRS[0]], tmp_path)
    with pytest.raises(CgRayError, match="Python identifier"):
        export_items(PAIRS, tmp_path, name="my-probe")
    assert list(tmp_path.iterdir()) == []


def test_a_failed_export_leaves_the_previous_files_whole(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    first = export_items(PAIRS[:1], tmp_path)
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}

    def fail(*args: object, **kwargs: object) -> str:
        raise KeyboardInterrupt  # interrupted while rendering the task files

    monkeypatch.setattr(export_module, "lm_eval_yaml", fail)
    with pytest.raises(KeyboardInterrupt):
        export_items(PAIRS, tmp_path)
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before
    assert read_jsonl(first["items"]) == expected_rows(PAIRS[:1])


def test_an_interrupted_write_leaves_no_partial_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    real_write = Path.write_text

    def write_then_fail(self: Path, text: str, *args: Any, **kwargs: Any) -> int:
        if self.name.startswith(".toy_probe_inspect.py."):
            real_write(self, text[:10], *args, **kwargs)
            raise OSError("disk full")
        return real_write(self, text, *args, **kwargs)

    monkeypatch.setattr(Path, "write_text", write_then_fail)
    with pytest.raises(OSError, match="disk full"):
        export_items(PAIRS, tmp_path, name="toy_probe")
    assert "toy_probe_inspect.py" not in {p.name for p in tmp_path.iterdir()}
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temporary file left
