"""Export a probe's verified items so users can run them in their own harness: `items.jsonl` (one line per
item, both roles), an lm-evaluation-harness task group (`NAME.yaml` and the `NAME_lmeval.py` it selects
documents with) and an inspect_ai task (`NAME_inspect.py`). The task files import nothing of cg_ray."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from string import Template
from typing import Any

import yaml

from cg_ray.artifacts.publish import atomic_file
from cg_ray.errors import CgRayError, InputError
from cg_ray.probe.items import ROLES, ItemPair
from cg_ray.scoring import SCORERS

ITEMS_FILE = "items.jsonl"
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")  # a file stem, a Python function and an lm-eval task name
_LETTER = re.compile(r"\(?([A-Z])\)?")


@dataclass(frozen=True)
class _Export:
    """How the harnesses score the items of one cg_ray scorer. lm-eval: a regex filter that picks the answer
    out of the response (its match is stripped), then exact_match with these options."""

    regex: str
    group_select: int
    metric: dict[str, Any]


_LOOSE = {"ignore_case": True, "ignore_punctuation": True}
# Both harnesses treat `exact` as the whole (stripped) one-line answer; `any_of` is stricter in lm-eval
# (equality, not containment: its exact_match has no "contains" mode).
EXPORTS: dict[str, _Export] = {
    "exact": _Export(r"(?s)^(.*)$", 0, _LOOSE),
    "any_of": _Export(r"(?s)^(.*)$", 0, _LOOSE),
    # lm-eval's GSM8K "flexible-extract": the last number, then "$", "," and a final "." dropped.
    "numeric": _Export(
        r"(-?[$0-9.,]{2,})|(-?[0-9]+)",
        -1,
        {"ignore_case": True, "ignore_punctuation": False, "regexes_to_ignore": [",", r"\$", r"\.$"]},
    ),
    # The last capital letter standing alone ("B", "(B)", "B." and "the answer is B").
    "multiple_choice": _Export(r"(?<![A-Za-z])\(?([A-Z])\)?(?![A-Za-z'])", -1, _LOOSE),
}
_ALIASES = {"exact_match": "exact"}  # the function's name for the registry's `exact`


def export_items(pairs: Sequence[ItemPair], out_dir: Path, *, name: str = "cg_ray_probe") -> dict[str, Path]:
    """Write the items and both harnesses' task files into `out_dir`, each file atomically (complete or
    absent). Returns their paths: keys `items`, `lm_eval`, `lm_eval_docs` and `inspect`."""
    out_dir = Path(out_dir).resolve()  # lm-eval reads data_files relative to its working directory
    texts = export_texts(pairs, out_dir, name=name)
    paths = {key: out_dir / file for key, (file, _) in texts.items()}
    for key, (_, text) in texts.items():  # the items first: no task file ever names a missing one
        with atomic_file(paths[key]) as tmp:
            tmp.write_text(text, encoding="utf-8")
    return paths


PROBE_ABOUT = "cg-ray probe items: target items exhibit a gap, controls are their matched pairs."


def export_texts(pairs: Sequence[ItemPair], out_dir: Path, *, name: str = "cg_ray_probe") -> dict[str, tuple[str, str]]:
    """key -> (file name, text) of every exported file, the items first, for files that will live in
    `out_dir` (an absolute path: the lm-eval YAML names the items file by it)."""
    if not _NAME.fullmatch(name):
        raise CgRayError(f"export name {name!r} must be a Python identifier (letters, digits, '_')")
    return harness_texts(item_rows(pairs), out_dir, name=name)


def harness_texts(
    rows: Sequence[dict[str, str]],
    out_dir: Path,
    *,
    name: str,
    roles: Sequence[str] = ROLES,
    items_file: str = ITEMS_FILE,
    about: str = PROBE_ABOUT,
) -> dict[str, tuple[str, str]]:
    """`export_texts` for rows already made (`item_rows`' fields: id, gap_id, role, pair_id, input, target,
    scorer), of the given `roles` (a probe's target and control; `cg-ray augment`'s single items), into
    `items_file`; `about`: one line on what the items are, in the task files."""
    if not _NAME.fullmatch(name):
        raise CgRayError(f"export name {name!r} must be a Python identifier (letters, digits, '_')")
    scorers = sorted({row["scorer"] for row in rows})
    return {
        "items": (items_file, "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows)),
        "lm_eval": (f"{name}.yaml", lm_eval_yaml(name, Path(out_dir) / items_file, scorers, roles, about)),
        "lm_eval_docs": (f"{name}_lmeval.py", lm_eval_docs_module(name, scorers, roles)),
        "inspect": (f"{name}_inspect.py", _INSPECT_TASK.substitute(name=name, items=items_file, about=about)),
    }


def item_rows(pairs: Sequence[ItemPair]) -> list[dict[str, str]]:
    """One row per item, target then control of each pair; refuses what the harnesses could not score."""
    if not pairs:
        raise CgRayError("no item pairs to export: the probe verified no items")
    rows: list[dict[str, str]] = []
    seen: set[str] = set()
    for index, pair in enumerate(pairs):
        scorer = exportable_scorer(pair.scorer, index)
        if pair.pair_id in seen:
            raise InputError(f"pair id {pair.pair_id!r} appears twice", row=index, field="pair_id")
        seen.add(pair.pair_id)
        for role in ROLES:
            prompt, reference = pair.side(role)
            if scorer == "multiple_choice" and not _LETTER.fullmatch(reference.strip()):
                raise InputError(
                    f"a multiple_choice reference must be a letter to export, got {reference!r}",
                    row=index,
                    field=f"{role}_reference",
                )
            rows.append(
                {
                    "id": pair.item_id(role),
                    "gap_id": pair.gap_id,
                    "role": role,
                    "pair_id": pair.pair_id,
                    "input": prompt,
                    "target": reference,
                    "scorer": scorer,
                }
            )
    return rows


def exportable_scorer(name: str, index: int) -> str:
    """The registry's name for `name`; an error naming it where the harnesses have no equivalent."""
    name = _ALIASES.get(name, name)
    if name not in SCORERS:
        raise InputError(SCORERS.unknown_message(name), row=index, field="scorer")
    if name not in EXPORTS:
        raise InputError(
            f"scorer {name!r} cannot be exported (exportable: {', '.join(sorted(EXPORTS))})", row=index, field="scorer"
        )
    return name


class _Function(str):
    """A YAML `!function module.attr` reference (lm-eval imports it from a module beside the YAML)."""


class _Dumper(yaml.SafeDumper):
    def ignore_aliases(self, data: Any) -> bool:
        return True  # shared option lists written out in full: the YAML stays readable


def _represent_str(dumper: yaml.SafeDumper, value: str) -> yaml.Node:
    # "\n" in double quotes rather than a folded block spanning lines.
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style='"' if "\n" in value else None)


_Dumper.add_representer(str, _represent_str)
_Dumper.add_representer(_Function, lambda dumper, value: dumper.represent_scalar("!function", str(value)))


def lm_eval_yaml(
    name: str, items: Path, scorers: Sequence[str], roles: Sequence[str] = ROLES, about: str = PROBE_ABOUT
) -> str:
    """One group: a subgroup per role (its exact_match averaged over its items), a task per role and scorer
    in it. Keys beside `group` are defaults every task inherits."""
    groups = []
    for role in roles:
        tasks = [_lm_eval_task(name, role, scorer) for scorer in scorers]
        groups.append(
            {
                "group": f"{name}_{role}",
                "task": tasks,
                "aggregate_metric_list": [
                    {"metric": "exact_match", "filter_list": ["answer"], "aggregation": "mean", "weight_by_size": True}
                ],
            }
        )
    config = {
        "group": name,
        "task": groups,
        "dataset_path": "json",
        "dataset_kwargs": {"data_files": {"test": str(items)}},
        "test_split": "test",
        "output_type": "generate_until",
        "doc_to_text": "{{input}}",
        "doc_to_target": "{{target}}",
        # Items ask for a short answer: one line, greedy.
        "generation_kwargs": {"until": ["\n"], "do_sample": False, "temperature": 0.0, "max_gen_toks": 256},
    }
    header = (
        f"# {about}\n# For lm-evaluation-harness: lm_eval --include_path DIR --tasks {name}\n"
        f"# data_files is absolute (lm-eval reads it from its working directory): moving this folder\n"
        f"# means editing it.\n"
    )
    return header + yaml.dump(config, Dumper=_Dumper, sort_keys=False, allow_unicode=True)


def _lm_eval_task(name: str, role: str, scorer: str) -> dict[str, Any]:
    spec = EXPORTS[scorer]
    regex = {"function": "regex", "regex_pattern": spec.regex, "group_select": spec.group_select}
    return {
        "task": f"{name}_{role}_{scorer}",
        "process_docs": _Function(f"{name}_lmeval.{role}_{scorer}"),
        "filter_list": [{"name": "answer", "filter": [regex, {"function": "take_first"}]}],
        "metric_list": [{"metric": "exact_match", "aggregation": "mean", "higher_is_better": True, **spec.metric}],
        "metadata": {"version": 1.0},
    }


def lm_eval_docs_module(name: str, scorers: Sequence[str], roles: Sequence[str] = ROLES) -> str:
    """The `process_docs` functions of the YAML: each keeps the items of one role and one scorer."""
    functions = "".join(
        f"\n\ndef {role}_{scorer}(dataset):\n    return _select(dataset, {role!r}, {scorer!r})\n"
        for role in roles
        for scorer in scorers
    )
    return _LM_EVAL_DOCS.substitute(name=name) + functions


_LM_EVAL_DOCS = Template('''"""The items of one role and scorer for each task of ${name}.yaml (lm-eval loads this
beside it)."""


def _select(dataset, role, scorer):
    return dataset.filter(lambda doc: doc["role"] == role and doc["scorer"] == scorer)
''')

_INSPECT_TASK = Template('''"""${about}
As an inspect_ai task: inspect eval ${name}_inspect.py --model PROVIDER/MODEL

Accuracy is reported per role. Each item is scored as its `scorer` field says (numbers compared as numbers,
a choice by its letter, short answers by match)."""

import re
from pathlib import Path

from inspect_ai import Task, task
from inspect_ai.dataset import FieldSpec, json_dataset
from inspect_ai.scorer import (
    CORRECT,
    INCORRECT,
    Score,
    Scorer,
    Target,
    accuracy,
    grouped,
    includes,
    match,
    scorer,
    stderr,
)
from inspect_ai.solver import TaskState, generate

ITEMS = Path(__file__).with_name("${items}")
LETTER = re.compile(r"(?<![A-Za-z])\\(?([A-Z])\\)?(?![A-Za-z'])")


@scorer(metrics=[accuracy(), stderr()])
def letter() -> Scorer:
    """The last capital letter standing alone in the answer ("B", "(B)", "the answer is B") against the
    target's letter."""

    async def score(state: TaskState, target: Target) -> Score:
        found = LETTER.findall(state.output.completion)
        answer = found[-1] if found else ""
        gold = target.text.strip().strip("()")
        return Score(value=CORRECT if answer and answer == gold else INCORRECT, answer=answer)

    return score


@scorer(metrics=[grouped(accuracy(), "role"), stderr()])
def item_scorer() -> Scorer:
    scorers = {
        "numeric": match(numeric=True),
        "exact": match(),
        "any_of": includes(),
        "multiple_choice": letter(),
    }

    async def score(state: TaskState, target: Target) -> Score:
        return await scorers[state.metadata["scorer"]](state, target)

    return score


@task
def ${name}() -> Task:
    fields = FieldSpec(input="input", target="target", id="id", metadata=["gap_id", "role", "pair_id", "scorer"])
    return Task(
        dataset=json_dataset(str(ITEMS), fields),
        solver=generate(),
        scorer=item_scorer(),
        name="${name}",
    )
''')
