"""The encoder deployment's seam is typed: a ReaderConfig in, `SparseRow`s out (numpy arrays and a count,
picklable without the reader's modules), passed on unchanged by RemoteEncoder; the rows equal what the
in-process encoder gives, so the service's JSON does not depend on which one ran."""

from __future__ import annotations

import asyncio
import pickle
from typing import Any

import numpy as np
import pytest

from cg_ray.activations.config import ReaderConfig
from cg_ray.activations.packing import SparseRow, pack_concepts, sparse_rows
from cg_ray.serve.app import EncoderDeployment, RemoteEncoder, ServeArgs, build_app
from cg_ray.serve.encoding import LocalEncoder
from cg_ray.serve.settings import ServiceSettings
from cg_ray.testing.fakes import HashingReader

FAKE = "cg_ray.testing.fakes:HashingReader.from_config"
TEXTS = ["a b a", "c", ""]
ENCODER: Any = EncoderDeployment.func_or_class  # type: ignore[attr-defined]  # the class behind the deployment


def _deployment() -> Any:
    return ENCODER(ReaderConfig(), FAKE, max_batch_size=8, wait_s=0.0)


def _same(a: Any, b: Any) -> bool:
    return (
        np.array_equal(a.concept_ids, b.concept_ids)
        and a.concept_ids.dtype == b.concept_ids.dtype
        and np.array_equal(a.concept_acts, b.concept_acts)
        and a.concept_acts.dtype == b.concept_acts.dtype
        and a.n_tokens == b.n_tokens
    )


def test_the_deployment_refuses_a_dict_config() -> None:
    with pytest.raises(TypeError, match="ReaderConfig, not dict"):
        ENCODER({"model": "m"}, FAKE, max_batch_size=8, wait_s=0.0)


# Serve's batch queue is made on a method's first call, once per process, and holds a weak reference that
# makes the deployment class unpicklable: these tests call the undecorated method instead.
BATCH = ENCODER.encode_batch.__wrapped__


def test_encode_batch_splits_the_forward_pass_into_each_requests_concept_rows() -> None:
    out = asyncio.run(BATCH(_deployment(), [TEXTS[:1], [], TEXTS[1:]]))
    expected = HashingReader().read(TEXTS)
    assert [len(rows) for rows in out] == [1, 0, 2]
    assert all(type(r) is SparseRow for rows in out for r in rows)
    assert all(_same(r, e) for r, e in zip(out[0] + out[2], expected, strict=True))


def test_encode_and_encode_spans_return_concept_rows() -> None:
    deployment = _deployment()

    async def one_request_batch(texts: list[str]) -> list[SparseRow]:
        (rows,) = await BATCH(deployment, [texts])
        return list(rows)

    deployment.encode_batch = one_request_batch  # what Serve's queue does for a lone request
    rows = asyncio.run(deployment.encode(TEXTS))
    assert all(type(r) is SparseRow for r in rows)
    assert all(_same(r, e) for r, e in zip(rows, HashingReader().read(TEXTS), strict=True))
    spans = deployment.encode_spans(["zz a b", "zz c"], [3, 3], {"pool": "max"})
    assert all(type(r) is SparseRow for r in spans)
    assert [r.n_tokens for r in spans] == [2, 1] and spans[0].concept_acts.tolist() == [1.0, 1.0]


def test_concept_rows_pickle_and_pack_as_the_reader_output() -> None:
    acts = HashingReader().read(TEXTS)
    rows = pickle.loads(pickle.dumps(sparse_rows(acts)))
    assert all(_same(r, a) for r, a in zip(rows, acts, strict=True))
    assert pack_concepts(rows) == pack_concepts(acts)


class _Method:
    def __init__(self, reply: Any) -> None:
        self.reply = reply
        self.calls: list[tuple[Any, ...]] = []

    async def _result(self) -> Any:
        return self.reply

    def remote(self, *args: Any) -> Any:
        self.calls.append(args)
        return self._result()


class _Handle:
    def __init__(self, rows: list[SparseRow]) -> None:
        self.encode = _Method(rows)
        self.encode_spans = _Method(rows)


def test_remote_encoder_passes_the_rows_on_as_the_local_encoder_gives_them() -> None:
    rows = sparse_rows(HashingReader().read(TEXTS))
    handle = _Handle(rows)
    remote = RemoteEncoder(handle, {"d_sae": 256, "describe": {"model": "hashing-fake"}})  # type: ignore[arg-type]
    local = LocalEncoder(HashingReader())
    got = asyncio.run(remote.encode(TEXTS))
    assert got == rows and all(type(r) is SparseRow for r in got)
    assert all(_same(r, e) for r, e in zip(got, asyncio.run(local.encode(TEXTS)), strict=True))
    asyncio.run(remote.encode_spans(["x y"], [2], {"pool": "max", "span_tokens": 4}))
    assert handle.encode_spans.calls == [(["x y"], [2], {"pool": "max", "span_tokens": 4})]


def test_build_app_binds_typed_settings_and_reader_config() -> None:
    """What Serve pickles to the replicas: the validated models, not dumps to re-parse there."""
    args = ServeArgs.model_validate(
        {"reader": {"device": "cpu", "token_budget": 64}, "encoder": {"reader_factory": FAKE}}
    )
    app: Any = build_app(args)
    settings, encoder, _ = app._bound_deployment.init_args
    assert type(settings) is ServiceSettings and settings.reader == ReaderConfig(device="cpu", token_budget=64)
    assert settings.model_fields_set == {"reader"}
    reader_config, factory, *_ = encoder._bound_deployment.init_args
    assert type(reader_config) is ReaderConfig and reader_config == settings.reader and factory == FAKE
    assert pickle.loads(pickle.dumps(settings)) == settings
