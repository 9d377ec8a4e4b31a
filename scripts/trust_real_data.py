"""Inputs for `cg-ray validate` on real third-party scored data (docs/trust.md), from ../shared/data.

    python scripts/trust_real_data.py prepare DATA_DIR WORK_DIR     # JSONL inputs for `cg-ray extract`
    python scripts/trust_real_data.py rescore ROWS SCORES_JSONL MODEL OUT
    python scripts/trust_real_data.py table NAME=VALIDATE_JSON ...      # the markdown table of docs/trust.md
    python scripts/trust_real_data.py seeds NAME=JSON,JSON,... ...     # means over splits of several seeds

`prepare` writes one JSONL per data set with the texts the reader reads and the scores:
- gsm8k.jsonl: the 1,319 GSM8K test questions (prompt only) with GPT-3 175B + verifier's scores; the other
  three GPT-3 models' scores are attached to the same activations afterwards with `rescore` (the reader
  reads the question only, so the activations do not depend on the model);
- bbh.jsonl: the 2,025 BIG-Bench Hard questions (75 × 27 tasks) with code-davinci-002 (CoT) scores, each
  task its own benchmark (`bbh/<task>`); `rescore` attaches the direct-answer scores;
- mt_bench.jsonl: question turn + the model's answer turn, scored GPT-4 rating / 10, for the five models
  that have both answers and GPT-4 single judgments, pooled (one row per model × question × turn; the
  benchmark is the MT-Bench category; metadata: category, answer_model, turn);
AlpacaEval battles become rows with `cg-ray arena-rows` (see docs/trust.md).
"""

from __future__ import annotations

import ast
import json
import sys
from pathlib import Path
from typing import Any


def _jsonl(path: Path) -> list[dict[str, Any]]:
    with path.open(encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def _write(path: Path, rows: list[dict[str, Any]]) -> None:
    tmp = path.with_suffix(".tmp")
    with tmp.open("w", encoding="utf-8") as fh:
        for r in rows:
            fh.write(json.dumps(r) + "\n")
    tmp.replace(path)
    print(f"{path}: {len(rows)} rows")


def prepare(data: Path, work: Path) -> None:
    work.mkdir(parents=True, exist_ok=True)
    outputs = data / "model_outputs"
    questions = {r["id"]: r for r in _jsonl(data / "benchmarks" / "gsm8k.jsonl")}
    gsm = [r for r in _jsonl(outputs / "gsm8k_gpt3_solutions.jsonl") if r["model"] == "gpt3-175b_verification"]
    _write(
        work / "gsm8k.jsonl",
        [
            {
                "id": r["id"],
                "benchmark": "gsm8k",
                "model": r["model"],
                "score": r["score"],
                "prompt": questions[r["id"]]["prompt"],
            }
            for r in gsm
        ],
    )
    bbh_q = {r["id"]: r for r in _jsonl(data / "benchmarks" / "bbh.jsonl")}
    bbh = [r for r in _jsonl(outputs / "bbh_codex.jsonl") if r["model"] == "code-davinci-002-cot" and r["id"] in bbh_q]
    _write(
        work / "bbh.jsonl",
        [
            {
                "id": r["id"],
                "benchmark": f"bbh/{r['metadata']['task']}",
                "model": r["model"],
                "score": r["score"],
                "prompt": bbh_q[r["id"]]["prompt"],
            }
            for r in bbh
        ],
    )
    mt_q = {r["id"]: r for r in _jsonl(data / "benchmarks" / "mt_bench.jsonl")}
    answers: dict[tuple[str, str], list[str]] = {}
    for r in _jsonl(outputs / "mt_bench_model_answers.jsonl"):
        out = r["output"]
        turns = json.loads(out) if isinstance(out, str) and out.startswith("[") else out
        answers[(r["model"], r["id"])] = turns if isinstance(turns, list) else [str(turns)]
    rows, seen = [], set()
    for j in _jsonl(outputs / "mt_bench_gpt4_single_judgments.jsonl"):
        turn = int(j["metadata"]["turn"])
        key = (j["model"], j["id"], turn)
        if key in seen or j["score"] is None or (j["model"], j["id"]) not in answers:
            continue
        seen.add(key)
        q = mt_q[j["id"]]
        meta = q["metadata"] if isinstance(q["metadata"], dict) else ast.literal_eval(q["metadata"])
        turns = answers[(j["model"], j["id"])]
        if len(turns) < turn or len(meta["turns"]) < turn:
            continue
        rows.append(
            {
                "id": f"{j['model']}/{j['id']}/t{turn}",
                "benchmark": f"mt_bench/{meta['category']}",
                "model": "mt-bench-5-models",
                "score": j["score"],
                "prompt": meta["turns"][turn - 1],
                "response": turns[turn - 1],
                # for `cg-ray describe`'s metadata enrichment: which model answered, which turn
                "metadata": {"category": meta["category"], "answer_model": j["model"], "turn": turn},
            }
        )
    _write(work / "mt_bench.jsonl", rows)


def rescore(rows_path: Path, scores_path: Path, model: str, out: Path) -> None:
    """rows.parquet with the scores (and model name) of another model, matched on row_id."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    scores = {r["id"]: r["score"] for r in _jsonl(scores_path) if r["model"] == model}
    table = pq.read_table(rows_path)
    ids = table.column("row_id").to_pylist()
    missing = [i for i in ids if i not in scores]
    if missing:
        raise SystemExit(f"{scores_path}: no score of {model} for {len(missing)} rows, e.g. {missing[0]}")
    schema = table.schema
    table = table.set_column(
        schema.get_field_index("score"), schema.field("score"), pa.array([scores[i] for i in ids], pa.float64())
    )
    table = table.set_column(schema.get_field_index("model"), schema.field("model"), pa.array([model] * len(ids)))
    pq.write_table(table, out)
    print(f"{out}: {len(ids)} rows of {model}")


def _cell(entry: dict[str, Any] | None, key: str, signed: bool) -> str:
    if entry is None or entry.get(key) is None:
        return "—"
    f = "{:+.3f}" if signed else "{:.3f}"
    low, high = entry.get("low"), entry.get("high")
    bounds = f" [{f.format(low)}, {f.format(high)}]" if low is not None and high is not None else ""
    return f.format(entry[key]) + bounds


def table(named: list[str]) -> None:
    """One markdown row per (data set, ranking): lift@5, lift@20, low-performance at M' = 10 and N' = 100."""
    print("| data set | test rows | ranking | lift@5 | lift@20 | low-perf M'≥10 | low-perf N'≥100 |")
    print("|---|---|---|---|---|---|---|")
    for item in named:
        name, path = item.split("=", 1)
        r = json.loads(Path(path).read_text(encoding="utf-8"))
        series = {
            "new": (r["lift"], r["low_performance"]),
            "paper": (r["baselines"]["paper"]["lift"], r["baselines"]["paper"]["low_performance"]),
            "random": (r["baselines"]["random"]["lift"], r["baselines"]["random"]["low_performance"]),
        }
        for label, (lift, lp) in series.items():
            at = {e["k"]: e for e in lift}
            by_m = {e["M"]: e for e in lp["by_size"]}
            by_n = {e["N"]: e for e in lp["by_rows"]}
            key = "lift" if label != "random" else "value"
            print(
                f"| {name} | {r['split']['n_test']} | {label} | {_cell(at.get(5), key, True)} | "
                f"{_cell(at.get(20), key, True)} | {_cell(by_m.get(10), 'value', False)} | "
                f"{_cell(by_n.get(100), 'value', False)} |"
            )


def seeds(named: list[str]) -> None:
    """Mean over several seeds' splits of lift@5, lift@20 and low-perf M'≥10, per ranking; and how often the
    new ranking's value is below (better than) the paper's."""
    print(
        "| data set | seeds | ranking | mean lift@5 | mean lift@20 | mean low-perf M'≥10 "
        "| new < paper (lift@5 / lift@20 / M'≥10) |"
    )
    print("|---|---|---|---|---|---|---|")
    for item in named:
        name, paths = item.split("=", 1)
        runs = [json.loads(Path(p).read_text(encoding="utf-8")) for p in paths.split(",")]
        values: dict[str, list[tuple[float, float, float]]] = {"new": [], "paper": [], "random": []}
        for r in runs:
            for label in values:
                lift = r["lift"] if label == "new" else r["baselines"][label]["lift"]
                lp = r["low_performance"] if label == "new" else r["baselines"][label]["low_performance"]
                key = "value" if label == "random" else "lift"
                at = {e["k"]: e.get(key) for e in lift}
                m10 = next(e["value"] for e in lp["by_size"] if e["M"] == 10)
                values[label].append((at[5], at[20], m10))
        wins = [sum(n[i] < p[i] for n, p in zip(values["new"], values["paper"], strict=True)) for i in range(3)]
        for label, rows in values.items():
            means = [sum(v[i] for v in rows) / len(rows) for i in range(3)]
            extra = " / ".join(f"{w}/{len(runs)}" for w in wins) if label == "new" else ""
            print(f"| {name} | {len(runs)} | {label} | {means[0]:+.3f} | {means[1]:+.3f} | {means[2]:.3f} | {extra} |")


if __name__ == "__main__":
    cmd, *rest = sys.argv[1:]
    if cmd == "prepare":
        prepare(Path(rest[0]), Path(rest[1]))
    elif cmd == "rescore":
        rescore(Path(rest[0]), Path(rest[1]), rest[2], Path(rest[3]))
    elif cmd == "table":
        table(rest)
    elif cmd == "seeds":
        seeds(rest)
    else:
        raise SystemExit(__doc__)
