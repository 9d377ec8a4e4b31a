"""Hugging Face ``generate`` fallback (no vLLM): an actor pool of models, batched, left-padded.

Tokenization mirrors ``ray.data.llm``'s stages (chat template as text, then the tokenizer's default
special tokens), so greedy outputs are comparable token for token with the vLLM backend.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pyarrow as pa

from cg_ray.generation.base import GENERATED_SCHEMA, ConfiguredGenerator, answer_pending, messages, output_row

if TYPE_CHECKING:
    import ray.data

    from cg_ray.generation.config import GenerationConfig


class HFChatModel:
    """One loaded model + tokenizer; ``complete(prompts)`` returns ``(texts, n_new_tokens)``."""

    def __init__(self, model_path: str, config: GenerationConfig) -> None:
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        self.config = config
        self.torch = torch
        self.tokenizer: Any = AutoTokenizer.from_pretrained(model_path)
        self.tokenizer.padding_side = "left"  # decoder-only: pad on the left so generation continues the text
        if self.tokenizer.pad_token is None:
            self.tokenizer.pad_token = self.tokenizer.eos_token
        from cg_ray.hardware import resolve_dtype

        self.device = "cuda" if config.resources.num_gpus > 0 and torch.cuda.is_available() else "cpu"
        # Resolved here, in the actor, so `auto` matches the hardware the model actually runs on.
        self.dtype = resolve_dtype(config.engine.dtype, self.device)
        auto_model: Any = AutoModelForCausalLM  # its stubs do not type from_pretrained usefully
        self.model: Any = auto_model.from_pretrained(model_path, dtype=getattr(torch, self.dtype))
        self.model.eval()
        self.model.to(self.device)

    def render(self, prompt: str) -> str:
        if not self.config.chat_template:
            return prompt
        text: str = self.tokenizer.apply_chat_template(
            messages(prompt, self.config.system_prompt), tokenize=False, add_generation_prompt=True
        )
        return text

    def complete(self, prompts: list[str]) -> tuple[list[str], list[int]]:
        sampling = self.config.sampling
        enc = self.tokenizer([self.render(p) for p in prompts], return_tensors="pt", padding=True).to(self.device)
        greedy = sampling.temperature == 0.0
        kwargs: dict[str, Any] = {"max_new_tokens": sampling.max_tokens, "do_sample": not greedy}
        if not greedy:
            kwargs.update(temperature=sampling.temperature, top_p=sampling.top_p)
            self.torch.manual_seed(sampling.seed)
        with self.torch.inference_mode():
            out = self.model.generate(**enc, **kwargs, pad_token_id=self.tokenizer.pad_token_id)
        new = out[:, enc["input_ids"].shape[1] :]
        texts, counts = [], []
        for ids in new.tolist():
            # Count up to and including the first EOS, as vLLM does; drop the padding after it.
            eos = self.tokenizer.eos_token_id
            n = ids.index(eos) + 1 if eos in ids else len(ids)
            texts.append(self.tokenizer.decode(ids[:n], skip_special_tokens=True))
            counts.append(n)
        return texts, counts


class _HFBatch:
    """Ray Data actor UDF: loads the model once per actor."""

    def __init__(self, model_path: str, config: GenerationConfig) -> None:
        self.model = HFChatModel(model_path, config)
        self.name = config.model

    def __call__(self, batch: pa.Table) -> pa.Table:
        return answer_pending(batch, self.answer)

    def answer(self, batch: pa.Table) -> pa.Table:
        rows = batch.to_pylist()
        texts, counts = self.model.complete([r["prompt"] for r in rows])
        return pa.Table.from_pylist(
            [output_row(r, t, n, self.name) for r, t, n in zip(rows, texts, counts, strict=True)],
            schema=GENERATED_SCHEMA,
        )


class HFGenerator(ConfiguredGenerator):
    def generate(self, ds: ray.data.Dataset) -> ray.data.Dataset:
        import ray.data

        from cg_ray.catalog import resolve_model

        res = self.config.resources
        return ds.map_batches(
            _HFBatch,
            fn_constructor_kwargs={"model_path": str(resolve_model(self.config.model)), "config": self.config},
            batch_format="pyarrow",
            batch_size=res.batch_size,
            num_cpus=res.num_cpus,
            num_gpus=res.num_gpus,
            compute=ray.data.ActorPoolStrategy(min_size=res.min_actors, max_size=res.max_actors),
            memory=res.memory_ask,
        )
