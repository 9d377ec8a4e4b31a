"""One writer of run directories (issue 32): files go into a run directory, or any output directory that
cg_ray/artifacts/layout.py names, only through that module (`ArtifactDir.write` while it is being built,
`RunDir.update` once published). A module that writes a file itself is refused here unless it is listed
below with why: a write of its own bypasses the registry's names, the model check of JSON documents and, in
a published run, the atomic replacement and the manifest's record of the step."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "cg_ray"

# Modules that write files themselves, each with why (none of them into a run or output directory, except
# those marked "to move": issue 32 moves them onto the writer).
WRITERS_ALLOWED: dict[str, str] = {
    "artifacts/layout.py": "the writer",
    "artifacts/contract.py": "write_document: the JSON serialiser the writer calls",
    "synthetic.py": "a synthetic rows file wherever the caller asks (an input, not a run directory)",
    "activations/extract.py": "`cg-ray extract`: a rows file and its manifest beside it, not a run directory",
    "benchmarks/inspect.py": "`cg-ray extract` of inspect logs: the rows read, as the JSONL input beside the output; "
    "an uploaded log's bytes in a private temporary file for inspect's own reader",
    "activations/compile_plan.py": "the measured figures' records (compile costs, reader path rates)",
    "serve/csv_safe.py": "a CSV download, in memory",
    "arena/rows.py": "`cg-ray arena-rows --out FILE`: one JSONL rows file",
    "cli/preparation.py": "`cg-ray models` outputs: an SAE's evaluation file, a JSONL listing",
    "sae_training/sae_train.py": "an SAE's training outputs (weights, config)",
    "pipeline/shards.py": "a job's shard files in its work directory",
    "pipeline/inputs.py": "a job's input rows in its work directory",
    "serve/jobs.py": "the service's job files (config, row parts) in its work directory",
    "serve/scopes.py": "an empty lock file beside the analysis' run (one scope of an analysis at a time), no artifact",
    "serve/battles.py": "an uploaded battles file in the service's store",
    "serve/routes/uploads.py": "an uploaded rows file in the service's store",
    "probe/work.py": "a probe's resumable work files (pairs written, answers) in its work directory",
    "probe/ledger.py": "the probe ledger's per-gap JSON files and their lock, in the ledger's own folder (outside any "
    "run: it must outlive `--overwrite` and copies of the run)",
    "describe/saved.py": "an explain's endpoint answers, appended as they arrive, in its work directory",
    "probe/export.py": "`export_items`: verified items and task files wherever the caller asks (a run's probe/export/ "
    "goes through RunDir.update)",
}

_FILE_METHODS = {"write_text", "write_bytes"}  # pathlib
_FRAME_WRITERS = {"to_csv", "to_parquet", "to_json"}  # pandas: a write when given a path
_MODULE_WRITERS = {
    ("pq", "write_table"),
    ("pq", "ParquetWriter"),
    ("pacsv", "write_csv"),
    ("json", "dump"),
    ("shutil", "copy"),
    ("shutil", "copy2"),
    ("shutil", "copyfile"),
    ("os", "link"),
}


def _mode(call: ast.Call, position: int) -> str:
    mode = call.args[position] if len(call.args) > position else None
    mode = next((k.value for k in call.keywords if k.arg == "mode"), mode)
    return mode.value if isinstance(mode, ast.Constant) and isinstance(mode.value, str) else ""


def _writes(call: ast.Call) -> bool:
    func = call.func
    if isinstance(func, ast.Name):
        return func.id == "write_document" or (func.id == "open" and any(c in _mode(call, 1) for c in "wax"))
    if not isinstance(func, ast.Attribute):
        return False
    if isinstance(func.value, ast.Name) and (func.value.id, func.attr) in _MODULE_WRITERS:
        return True
    if func.attr in _FILE_METHODS or func.attr == "write_document" or func.attr == "savefig":
        return True
    if func.attr == "open":  # Path.open("w")
        return any(c in _mode(call, 0) for c in "wax")
    path_given = bool(call.args) or any(k.arg == "path_or_buf" for k in call.keywords)
    return func.attr in _FRAME_WRITERS and path_given


def _writers() -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        where = path.relative_to(PACKAGE).as_posix()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and _writes(node):
                found.setdefault(where, []).append(f"{where}:{node.lineno}: {ast.unparse(node)[:100]}")
    return found


def test_only_the_layout_writes_into_run_and_output_directories() -> None:
    found = _writers()
    stray = [line for where, lines in found.items() if where not in WRITERS_ALLOWED for line in lines]
    assert not stray, "write through cg_ray/artifacts/layout.py (ArtifactDir.write, RunDir.update):\n" + "\n".join(
        stray
    )


def test_the_scan_sees_each_way_of_writing() -> None:
    """The forms the scan refuses, each seen (a write written another way would pass unseen)."""
    writes = [
        "pq.write_table(t, run.file(S.ROWS_FILE))",
        "path.write_text(text)",
        "frame.to_csv(path, index=False)",
        "json.dump(doc, fh)",
        "write_document(path, Model, doc)",
        "open(path, 'w')",
        "path.open(mode='a')",
        "pacsv.write_csv(t, path)",
    ]
    reads = ["pq.read_table(path)", "frame.to_csv(index=False)", "open(path)", "path.open()", "json.dumps(doc)"]
    assert all(_writes(ast.parse(code, mode="eval").body) for code in writes)  # type: ignore[arg-type]
    assert not any(_writes(ast.parse(code, mode="eval").body) for code in reads)  # type: ignore[arg-type]
    assert "artifacts/layout.py" in _writers()  # and the scan reads the package: it sees the writer's own
