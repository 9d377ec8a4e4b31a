"""The REST findings say where `cg-ray sensitivity` found them again on the same rows (issues #51, #59): each
failure mode and weak concept of GET /v1/analyses/{id}/weaknesses carries `other_readers` when the run has
sensitivity/, null otherwise (a slice never: a metadata rule), and the OpenAPI schema documents the field."""

from __future__ import annotations

from pathlib import Path

from tests.report.test_sensitivity_view import A, B, judged_run, measured, write_sensitivity

__all__ = ["measured"]  # the fixture: a small run measured for real, its findings the hand-written ones


def _analysis(service, run_dir: Path) -> tuple[str, dict[str, str]]:
    """The run as a finished analysis of the service: (its /weaknesses URL, the owner's key header)."""
    from cg_ray.serve.db import Analysis
    from cg_ray.serve.keys import create_key

    store = service[1]
    owner, raw = create_key(store, "dana")
    with store.session() as s:
        s.add(
            Analysis(
                id="ana_sensitive",
                owner=owner,
                upload_ids=[],
                mode="precomputed",
                options={},
                status="succeeded",
                run_dir=str(run_dir),
            )
        )
    return "/v1/analyses/ana_sensitive/weaknesses", {"X-API-Key": raw}


def test_other_readers_appears_in_the_finding_json_when_present(service, tmp_path: Path) -> None:
    client = service[0]
    run = judged_run(tmp_path / "run")
    url, headers = _analysis(service, run)
    plain = client.get(url, headers=headers, params={"kind": "failure_modes"}).json()
    assert [m["other_readers"] for m in plain["items"]] == [None, None]  # no sensitivity/: nothing said
    write_sensitivity(run)
    modes = client.get(url, headers=headers, params={"kind": "failure_modes"}).json()
    assert [m["other_readers"] for m in modes["items"]] == [f"{A} ✓, {B} ✗", f"{A} ~, {B} ✗"]
    slices = client.get(url, headers=headers, params={"kind": "slices"}).json()
    assert slices["items"][0]["other_readers"] is None  # a slice: metadata, every reader finds it
    weak = client.get(url, headers=headers).json()
    assert weak["items"][0]["concept_id"] == 7 and weak["items"][0]["other_readers"] == f"{A} ✓, {B} ~"


def test_the_view_shows_a_sensitivity_run_after_the_view_was_served(service, measured: Path) -> None:
    """GET …/view is cached per run; `cg-ray sensitivity` records itself in manifest.json, so the next view has
    its section and column."""
    client = service[0]
    url, headers = _analysis(service, measured)
    view = url.removesuffix("/weaknesses") + "/view"
    before = client.get(view, headers=headers).json()
    assert "sensitivity" not in before
    write_sensitivity(measured)
    after = client.get(view, headers=headers).json()
    assert [p["reader_b"] for p in after["sensitivity"]["pairs"]] == [A, B]
    assert after["profiles"]["failure_modes"]["items"][0]["other_readers"] == f"{A} ✓, {B} ✗"


def test_the_field_is_documented(client) -> None:
    schemas = client.get("/openapi.json").json()["components"]["schemas"]
    for name in ("FailureModeEntry", "SliceEntry", "ProfileEntry"):
        field = schemas[name]["properties"]["other_readers"]
        assert "✓ found, ~ partly, ✗ not found" in field["description"] and "not replication" in field["description"]
