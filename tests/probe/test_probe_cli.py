"""The flags of `cg-ray probe` become one validated ProbeConfig; a bad one is named."""

from __future__ import annotations

import argparse
from dataclasses import replace
from pathlib import Path

import pytest

from cg_ray.artifacts.probe import ProbeResult
from cg_ray.cli.probe import probe_config, register
from cg_ray.errors import ConfigError


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    register(parser.add_subparsers())
    return parser.parse_args(["probe", "RUN", *argv])


def test_flags_make_the_config() -> None:
    cfg = probe_config(parse("--gap", "mode:2", "--gap", "concept:7", "--pairs", "12", "--writer-endpoint",
                             "http://h:8000/v1", "--writer-model", "w", "--model-endpoint", "http://m/v1",
                             "--model", "m", "--no-reader-check"))  # fmt: skip
    assert cfg.gaps == ["mode:2", "concept:7"] and cfg.pairs == 12 and not cfg.reader_check
    assert cfg.writer is not None and cfg.writer.endpoint == "http://h:8000/v1" and cfg.writer.model == "w"
    assert cfg.model is not None and cfg.model.backend == "endpoint" and cfg.model.model == "m"
    alone = probe_config(parse("--writer-model", "smollm2-135m-instruct"))
    assert alone.writer is not None and alone.writer.endpoint is None and alone.writer.backend == "vllm"


def test_a_yaml_file_holds_settings_and_flags_win(tmp_path: Path) -> None:
    path = tmp_path / "probe.yaml"
    path.write_text("pairs: 30\nfdr: 0.1\nfamilies: only\n")
    cfg = probe_config(parse("--config", str(path), "--pairs", "50"))
    assert (cfg.pairs, cfg.fdr, cfg.families) == (50, 0.1, "only")


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (("--pairs", "2"), "probe setting pairs"),
        (("--fdr", "1.5"), "probe setting fdr"),
        (("--writer-endpoint", "http://h/v1"), "--writer-endpoint needs --writer-model"),
        (("--model-endpoint", "http://h/v1"), "--model-endpoint and --model go together"),
        (("--writer-endpoint", "http://user:pw@h/v1", "--writer-model", "w"), "probe setting writer.endpoint"),
    ],
)
def test_a_bad_setting_is_named(argv: tuple[str, ...], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        probe_config(parse(*argv))


def test_a_gap_with_a_difference_but_no_interval_is_printed(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """One answered pair: too_few has target − control but no test, so no interval (found on the demo run)."""
    import cg_ray.probe.plan as plan
    import cg_ray.probe.run as run

    gap = {"gap_id": "mode:1", "verdict": "too_few", "difference": 0.0, "ci_low": None, "ci_high": None,
           "n_pairs": 1, "note": "1 pairs, under 5"}  # fmt: skip
    monkeypatch.setattr(plan, "make_plan", lambda *a, **k: None)
    monkeypatch.setattr(run, "run_probe", lambda *a, **k: {"gaps": [gap], "requests": {}, "seconds": {}})
    args = parse()
    assert args.handler(args) == 0
    assert "mode:1         too_few    target − control +0.000 on 1 pairs" in capsys.readouterr().out


def test_a_gap_with_too_few_pairs_says_where_they_were_lost_and_what_to_ask_for() -> None:
    """The demo's next step (`cg-ray probe runs/default --gap mode:1`): 40 pairs written by the logic family, 2
    near copies, and the reader saw the mode's concepts in 3 of the 38 it checked."""
    from cg_ray.cli.probe import too_few_hint

    gap = ProbeResult(gap_id="mode:1", verdict="too_few", generator="family:logic.chain", pairs_written=40,
                      near_copies=2, malformed=0, wrong_reference=0, reader_checked=38, reader_passed=3)  # fmt: skip
    assert too_few_hint(gap) == (
        "the reader saw the gap in 3 of 38 checked pairs (8%) written by family:logic.chain: --pairs 267 aims at "
        "about 20; a writer whose items carry it (--writer-endpoint) may do better"
    )
    assert "--pairs" not in too_few_hint(replace(gap, reader_passed=0))  # none seen: more of the same will not help
    # without the reader check, pairs lost before it are the reason
    unread = replace(gap, reader_checked=0, reader_passed=0, near_copies=37)
    assert too_few_hint(unread).startswith("37 of 40 written pairs were dropped before the reader check")
    assert too_few_hint(replace(gap, reader_passed=30, near_copies=0)) == ""  # most passed: nothing to say


def test_each_gap_is_printed_with_its_earlier_attempts_and_standing_verdict(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Probe 3 re-probed mode:1, which probe 1 had confirmed: its new attempt, its earlier one and its standing
    verdict (a later attempt cannot undo a confirmation); mode:2, probed only by probe 2, under its own heading."""
    import cg_ray.probe.plan as plan
    import cg_ray.probe.run as run

    def gap(gap_id: str, probe: int, verdict: str, standing: str) -> dict[str, object]:
        return {"gap_id": gap_id, "verdict": verdict, "difference": -0.1, "ci_low": -0.3, "ci_high": 0.1,
                "q_value": 0.2, "n_pairs": 30, "note": "", "probe": probe, "standing": standing}  # fmt: skip

    rows = [gap("mode:1", 3, "unsettled", "confirmed"), gap("mode:2", 2, "refuted", "refuted"),
            gap("mode:1", 1, "confirmed", "confirmed")]  # fmt: skip
    summary = {"gaps": rows, "requests": {}, "seconds": {}, "probes": [{"probe": 1}, {"probe": 2}, {"probe": 3}]}
    monkeypatch.setattr(plan, "make_plan", lambda *a, **k: None)
    monkeypatch.setattr(run, "run_probe", lambda *a, **k: summary)
    args = parse()
    assert args.handler(args) == 0
    lines = capsys.readouterr().out.splitlines()
    pad = " " * 14
    at = lines.index("  mode:1         unsettled  target − control -0.100 [-0.300, +0.100] on 30 pairs, q=0.2")
    assert lines[at + 1] == f"  {pad} probe 1: confirmed  target − control -0.100 [-0.300, +0.100] on 30 pairs, q=0.2"
    assert lines[at + 2] == f"  {pad} standing: confirmed (probe 1, of 2 attempts)"
    assert lines[at + 3] == "  gaps of earlier probes only (their verdicts are final):"
    assert lines[at + 4].startswith("  mode:2         refuted")
