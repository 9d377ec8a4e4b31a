"""ConceptReader: texts → per-row sparse s̃ vectors, with the model stopped at the SAE's layer."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, Literal

from cg_ray.activations import compile_plan, flex, path_plan
from cg_ray.activations.config import ReaderConfig
from cg_ray.activations.model import (
    LayerCapture,
    LoadedModel,
    decoder_layers,
    forward_packed,
    forward_to_layer,
    load_model,
    resolve_device,
    text_config,
    truncate,
)
from cg_ray.activations.pooling import RowActs, pool_batch, pool_packed
from cg_ray.activations.reader_manifest import describe_reader
from cg_ray.activations.reader_setup import (
    choose_path,
    job_shape,
    resolve_layer,
    resolve_token_budget,
    softcapping,
)
from cg_ray.activations.saes import SaeEncoder, load_sae
from cg_ray.activations.tokens import (
    TokenPolicy,
    counted_mask,
    pad,
    plan_batches,
    resolve_policy,
    tokenize,
    tokenize_from,
)
from cg_ray.activations.varlen import (
    ATTENTION_NAME,
    PackedBatch,
    pack,
    packed_blocks,
    plan_groups,
    plan_packed_batches,
    use_varlen_attention,
)
from cg_ray.errors import ConfigError, InputError
from cg_ray.hardware import hardware_info

if TYPE_CHECKING:
    import torch
    from transformers import PreTrainedTokenizerBase

log = logging.getLogger(__name__)

Progress = Callable[[int, int], None]  # (rows done, rows total)


class ConceptReader:
    def __init__(self, loaded: LoadedModel, sae: SaeEncoder, config: ReaderConfig, layer: int) -> None:
        info = sae.info
        if info.d_in != loaded.hidden_size:
            raise InputError(
                f"the SAE expects d_in={info.d_in} but the model's hidden size is {loaded.hidden_size}",
                path=info.source,
                field="d_in",
            )
        self.config = config
        self.layer = layer
        self.model = loaded
        self.n_layers = loaded.n_layers
        truncate(loaded.base, layer)
        self.capture = LayerCapture(decoder_layers(loaded.base)[layer])
        param = next(loaded.base.parameters())
        self.device, self.dtype = param.device, param.dtype
        # Packed rows need the model to take our attention function; `packing: auto` picks the path
        # recorded fastest on this device kind (path_plan), then weighs it by the first call's rows.
        self._eager_forward = loaded.base.forward
        self._native_attention = str(getattr(loaded.base.config, "_attn_implementation", None))
        self.sae = sae.to(self.device, self.dtype)
        self.pad_multiple = 1
        self.compiled = False
        self.fallback: str | None = None  # why the packed flex path was left for padded batches
        self._flex_lengths: set[int] = set()  # static packed lengths already run (compiled)
        self._weighed = config.packing != "auto"  # auto: weighed by the job's rows at the first read
        self._apply_path(choose_path(config, loaded.base, compile_plan.device_kind(self.device)))
        self.planned_tokens: int | None = None
        self._measuring: list[float] | None = None
        self.compile_decision: compile_plan.CompileDecision | None = None
        if config.compile is True:
            self.compile_decision = compile_plan.fixed(True)
            self._compile()
        elif config.compile is False:
            self.compile_decision = compile_plan.fixed(False)
        self.policy: TokenPolicy = resolve_policy(config, info, loaded.tokenizer)
        self.stats = {
            "rows": 0,
            "tokens_read": 0,  # the rows' tokens
            "tokens_forward": 0,  # tokens run through the model (fewer where rows share a prefix)
            "tokens_counted": 0,
            "slots": 0,  # token slots the model ran: padding (padded batches, static packed lengths) included
            "truncated_rows": 0,
            "seconds": 0.0,
            "mask_seconds": 0.0,  # building the flex path's block masks
            "mask_batches": 0,
        }

    @classmethod
    def from_config(cls, config: ReaderConfig) -> ConceptReader:
        from cg_ray.catalog import resolve_model

        sae = load_sae(config.sae)  # cheap and the likeliest to fail: first
        info = sae.info
        layer = resolve_layer(config.layer, info.hook_layer, info.source)
        device = resolve_device(config.device)
        loaded = load_model(resolve_model(config.model), config.dtype, device)
        if layer >= loaded.n_layers:
            raise ConfigError(f"layer {layer} is out of range: the model has {loaded.n_layers} decoder layers")
        return cls(loaded, sae, config, layer)

    @property
    def tokenizer(self) -> PreTrainedTokenizerBase:
        return self.model.tokenizer

    @property
    def d_sae(self) -> int:
        return self.sae.info.d_sae

    def tokenize(self, texts: Sequence[str], *, add_special_tokens: bool = True) -> list[list[int]]:
        ids, truncated = tokenize(
            self.tokenizer, texts, self.policy, self.config.max_tokens, add_special_tokens=add_special_tokens
        )
        self.stats["truncated_rows"] += truncated
        return ids

    def read(
        self,
        texts: Sequence[str],
        *,
        add_special_tokens: bool = True,
        progress: Progress | None = None,
        count_from: Sequence[int] | None = None,
        pool: Literal["mean", "max"] = "mean",
        span_tokens: int | None = None,
    ) -> list[RowActs]:
        """s̃ per text. With `count_from` (a character offset per text), text[:offset] is read as context
        only: the model sees it, but only the tokens of text[offset:] (at most `span_tokens`) count."""
        if count_from is None:
            seqs = self.tokenize(texts, add_special_tokens=add_special_tokens)
            return self.read_ids(seqs, progress=progress, pool=pool)
        seqs, firsts, truncated = tokenize_from(
            self.tokenizer,
            texts,
            count_from,
            self.policy,
            self.config.max_tokens,
            add_special_tokens=add_special_tokens,
            span_tokens=span_tokens,
        )
        self.stats["truncated_rows"] += truncated
        return self.read_ids(seqs, progress=progress, count_from=firsts, pool=pool)

    def _apply_path(self, decision: path_plan.PathDecision) -> None:
        """Set the model up for `decision`'s path: the attention function, the token budget, the compiled
        forward's shape settings."""
        base = self.model.base
        self.path_decision = decision
        self.packed = decision.packed
        self.kernel = decision.kernel if self.packed else None
        self.packing_off = None if self.packed else decision.reason
        self.windows = flex.layer_windows(text_config(base)) if self.kernel == "flex" else None
        if self.kernel == "flex" and softcapping(base):  # made before any trace: a compiled forward then
            flex.softcap_mod(float(text_config(base).attn_logit_softcapping))  # finds it (no guard flips)
        if self.packed:
            use_varlen_attention(base)
        elif softcapping(base) and self._native_attention in ("sdpa", ATTENTION_NAME):
            # transformers' SDPA integration drops Gemma-2's logit soft-capping; eager attention applies it
            base.set_attn_implementation("eager")
        elif str(getattr(base.config, "_attn_implementation", None)) == ATTENTION_NAME:
            base.set_attn_implementation(self._native_attention)
        self.padded_attention = str(getattr(base.config, "_attn_implementation", None))
        if softcapping(base) and self.padded_attention == "eager":
            self.padded_attention = "eager (SDPA has no logit soft-capping)"
        self.token_budget = resolve_token_budget(self.config.token_budget, self.device, self.packed)
        if self.compiled:
            self._compile()

    def _compile(self) -> None:
        import torch

        # Padded batches: dynamic shapes, a handful of graphs for any suite (widths rounded to 64). The flex
        # path: one static packed length, dynamic=False (one graph per length, the soft-cap a constant).
        static = self.kernel == "flex"
        self.model.base.forward = torch.compile(self._eager_forward, backend=flex.SETTINGS.backend, dynamic=not static)
        self.pad_multiple = 1 if self.packed else 64
        self.compiled = True
        self._flex_lengths = set()  # a new compiled forward: each packed length compiles once more

    def weigh(self, seqs: Sequence[Sequence[int]]) -> None:
        """`packing: auto`, once per reader (the first call's rows, before reading them): the job's padding,
        shared-prefix and packing fill shares weighed against the recorded kernel rates (path_plan)."""
        if self._weighed:
            return
        self._weighed = True
        job = job_shape(seqs, self.config, self.device)
        decision = choose_path(self.config, self.model.base, compile_plan.device_kind(self.device), job)
        log.info("%s", decision.reason)
        self._apply_path(decision)

    def _fall_back(self, exc: BaseException) -> None:
        """Leave the flex path for padded batches, loudly: the reason goes to the log and the manifest."""
        first = (str(exc).strip().splitlines() or [""])[0][:400]
        self.fallback = f"packed-flex failed ({type(exc).__name__}: {first}); padded batches from here on"
        log.warning("%s", self.fallback)
        self._apply_path(self.path_decision.fallen_back(self.fallback))

    def plan(self, total_tokens: int) -> None:
        """The tokens the whole job will read (for `compile: auto`), when reading comes in several calls."""
        self.planned_tokens = total_tokens

    def _after_batch(self, call_tokens: int, batch_tokens: int, batch_s: float) -> None:
        """`compile: auto` decides once, after the first eager batch has given this device's eager rate;
        when it compiles, the first compiled batch gives the compilation time and the next ~10 s the
        speed-up, which are recorded for this machine's next decisions."""
        kind = compile_plan.device_kind(self.device)
        if self.compile_decision is None:
            planned = max(self.planned_tokens or 0, call_tokens)
            cost = compile_plan.recorded_cost(kind, hardware_info().line())
            eager = batch_tokens / max(batch_s, 1e-9)
            self.compile_decision = compile_plan.decide(planned, eager, cost)
            log.info("compile: auto -> %s", self.compile_decision.reason)
            if self.compile_decision.compile:
                self._compile()
                self._measuring = [eager, -1.0, 0.0, 0.0]  # eager rate, compile s, tokens, seconds after
            return
        if self._measuring is None:
            return
        eager, compile_s, tokens, seconds = self._measuring
        if compile_s < 0:
            self._measuring[1] = max(batch_s - batch_tokens / eager, 0.0)
            return
        tokens, seconds = tokens + batch_tokens, seconds + batch_s
        self._measuring[2:] = [tokens, seconds]
        if seconds >= 10.0:
            source = f"measured by the reader ({self.model.source}, layer {self.layer})"
            compile_plan.record_compile(
                kind, hardware_info().line(), compile_plan.CompileCost(compile_s, tokens / seconds / eager, source)
            )
            self._measuring = None

    def read_ids(
        self,
        seqs: Sequence[Sequence[int]],
        *,
        progress: Progress | None = None,
        count_from: Sequence[int] | None = None,
        pool: Literal["mean", "max"] = "mean",
    ) -> list[RowActs]:
        """s̃ per row, in input order. Rows are packed (or padded, longest-first) under the token budget.
        `count_from`: per row, the first token position that counts (the tokens before are context)."""

        started = time.perf_counter()
        self.weigh(seqs)
        results: list[RowActs | None] = [None] * len(seqs)
        call_tokens = sum(len(s) for s in seqs)
        done = 0
        todo = list(range(len(seqs)))
        while todo:
            sub = [seqs[i] for i in todo]
            sub_from = None if count_from is None else [count_from[i] for i in todo]
            try:
                for rows, pooled in self._batches(sub, sub_from, pool, call_tokens):
                    for j, row in zip(rows, pooled, strict=True):
                        results[todo[j]] = row
                    done += len(rows)
                    if progress is not None:
                        progress(done, len(seqs))
                todo = []
            except flex.failures() as exc:
                if self.kernel != "flex":
                    raise
                self._fall_back(exc)  # the rows not read yet go through padded batches
                todo = [i for i in todo if results[i] is None]
        self.stats["rows"] += len(seqs)
        self.stats["seconds"] += time.perf_counter() - started
        return [r for r in results if r is not None]

    def _batches(
        self,
        seqs: Sequence[Sequence[int]],
        count_from: Sequence[int] | None,
        pool: Literal["mean", "max"],
        call_tokens: int,
    ) -> Iterator[tuple[list[int], list[RowActs]]]:
        """Per batch of the current path: the rows it read (indices into `seqs`) and their s̃."""
        min_shared = self.config.min_shared_tokens if self.config.share_prefixes else None
        batches: list[Any] = (
            plan_packed_batches(plan_groups(seqs, min_shared, self.token_budget), self.token_budget)
            if self.packed
            else plan_batches([len(s) for s in seqs], self.token_budget)
        )
        for batch in batches:
            t0 = time.perf_counter()
            if self.packed:
                rows, pooled, forwarded, counted = self._packed_batch(pack(seqs, batch), count_from, pool)
            else:
                rows, pooled, forwarded, counted = self._padded_batch(seqs, batch, count_from, pool)
            read = sum(len(seqs[i]) for i in rows)
            self.stats["tokens_read"] += read
            self.stats["tokens_forward"] += forwarded
            self.stats["tokens_counted"] += counted
            self._after_batch(call_tokens, read, time.perf_counter() - t0)
            yield rows, pooled

    def _padded_batch(
        self,
        seqs: Sequence[Sequence[int]],
        batch: list[int],
        count_from: Sequence[int] | None,
        pool: Literal["mean", "max"],
    ) -> tuple[list[int], list[RowActs], int, int]:
        import torch

        ids, mask = pad([seqs[i] for i in batch], self.policy.pad_id, self.config.padding_side, self.pad_multiple)
        ids, mask = ids.to(self.device), mask.to(self.device)
        hidden = forward_to_layer(self.model.base, self.capture, ids, mask)
        self.stats["slots"] += ids.numel()
        first = None if count_from is None else torch.as_tensor([count_from[i] for i in batch], dtype=torch.long)
        keep = counted_mask(ids, mask, self.policy, first)
        pooled = pool_batch(hidden, keep, self.sae, self.config.sae_chunk_tokens, pool)
        return batch, pooled, int(mask.sum()), int(keep.sum())

    def _packed_batch(
        self, packed: PackedBatch, count_from: Sequence[int] | None, pool: Literal["mean", "max"]
    ) -> tuple[list[int], list[RowActs], int, int]:

        ids = packed.input_ids.to(self.device)
        hidden = self.packed_hidden(packed)
        pooled, kept = pool_packed(
            hidden, ids, packed, count_from, self.policy, self.sae, self.config.sae_chunk_tokens, pool
        )
        return packed.rows, pooled, int(ids.shape[1]), kept

    def packed_hidden(self, packed: PackedBatch) -> torch.Tensor:
        """Layer L's output for one packed batch's real tokens, (T, d), through the reader's kernel: the
        SDPA loop (the layout in a context variable), or FlexAttention with the batch's block masks built
        first, at the static packed length, and handed to the model as its attention mask."""
        import torch

        ids, positions = packed.input_ids.to(self.device), packed.position_ids.to(self.device)
        n = ids.shape[1]
        if self.kernel != "flex":
            with packed_blocks(packed.blocks):
                hidden = forward_packed(self.model.base, self.capture, ids, positions)[0]
            self.stats["slots"] += n
            return hidden
        size = flex.static_length(n, self.token_budget)
        before = flex.graphs_compiled()
        # inputs and masks made in inference mode whoever calls: a compiled forward guards on their dispatch
        # keys, so a caller in inference mode (agreement.row_hidden) and one outside share one graph
        with torch.inference_mode(), flex.guarded():
            ids = torch.nn.functional.pad(ids, (0, size - n), value=self.policy.pad_id)
            positions = torch.nn.functional.pad(positions, (0, size - n))
            t0 = time.perf_counter()
            layout = flex.FlexLayout.of(packed.blocks, self.device, size)
            masks = layout.block_masks(list((self.windows or {"": None}).values()))
            if self.device.type == "cuda":
                torch.cuda.synchronize(self.device)
            self.stats["mask_seconds"] += time.perf_counter() - t0
            self.stats["mask_batches"] += 1
            argument = flex.mask_argument(masks, self.windows or {"": None})
            hidden = forward_packed(self.model.base, self.capture, ids, positions, argument)[0]
        if size in self._flex_lengths and flex.graphs_compiled() > before:
            raise flex.Recompiled(
                f"a packed batch of {size} slots compiled {flex.graphs_compiled() - before} new graph(s) "
                "after one of that length had run"
            )
        self._flex_lengths.add(size)
        self.stats["slots"] += size
        return hidden[:n]

    def describe(self) -> dict[str, Any]:
        """The resolved reader, for the run manifest (`reader_manifest.describe_reader`)."""
        return describe_reader(self)
