"""`cg-ray sae train`: train the default reader's own TopK SAE with sae-lens
(docs/reader.md, "The default SAE and its labels").

What we add around sae-lens' `LanguageModelSAETrainingRunner`, and why:
- the corpus (model answers only, hashed train/held-out split, see `corpus.py`);
- attention sinks and special tokens are excluded (`seqpos_slice`, `exclude_special_tokens`): their
  residual norms are ~100× a normal token's and would dominate the reconstruction loss;
- the decoder bias starts at the (normalised) mean activation, which sae-lens does not do; the same
  norm estimate is handed to the trainer, so the LM is not run twice for it;
- a short dead-latent window (sae-lens' default is 1,000 steps, longer than our whole run, so its AuxK
  loss never switched on and a third of the latents ended dead);
- a warm start from a shipped SAE (`init_from`) on documents the earlier run has not seen
  (`skip_tokens`), to continue a run that a time limit cut short;
- an optional wall-clock limit that ends training gracefully (scaling folded in, SAE saved), so a run on
  a shared CPU finishes with a shippable SAE rather than being killed.
"""

from __future__ import annotations

import logging
import os
import shutil
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from cg_ray.artifacts.contract import TrainingStats, write_document
from cg_ray.artifacts.publish import atomic_directory
from cg_ray.errors import ConfigError

if TYPE_CHECKING:
    from sae_lens import TrainingSAE
    from sae_lens.training.sae_trainer import SAETrainer

TRAINING_FILE = "training.json"  # beside the weights: settings, tokens, time (a `TrainingStats`)

log = logging.getLogger(__name__)


class SaeTrainConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    model: str = Field(default="smollm2-135m-instruct", description="known model name or local HF directory")
    layer: int = Field(default=20, ge=0, description="hook model.layers.<layer> (residual stream after the block)")
    d_sae: int = Field(default=4608, ge=1)
    k: int = Field(default=32, ge=1)
    training_tokens: int = Field(default=2_000_000, ge=1)
    context_size: int = Field(default=128, ge=8)
    sink_positions: int = Field(default=3, ge=0, description="leading positions excluded (attention sinks)")
    train_batch_size_tokens: int = Field(default=4096, ge=1)
    store_batch_size_prompts: int = Field(default=16, ge=1)
    n_batches_in_buffer: int = Field(default=256, ge=1)
    n_batches_for_norm_estimate: int = Field(default=20, ge=1)
    lr: float = Field(default=1e-3, gt=0)
    lr_warm_up_steps: int = Field(default=50, ge=0)
    lr_decay_steps: int = Field(
        default=0, ge=0, description="linear decay of the learning rate to 0 over the last N steps"
    )
    dead_feature_window: int = Field(
        default=25,
        ge=1,
        description="steps without firing after which a latent counts as dead and AuxK trains it "
        "(25 × 4,096 ≈ 100k tokens, about the held-out split's size)",
    )
    init_from: Path | None = Field(
        default=None, description="warm start: an sae-lens SAE directory of the same shape (folded weights)"
    )
    skip_tokens: int = Field(
        default=0, ge=0, description="skip the shuffled training documents holding the first N tokens"
    )
    bf16: bool | Literal["auto"] = Field(
        default="auto",
        description="autocast the SAE step and the LM forward to bfloat16; auto: where bf16 is native "
        "(CUDA, or a CPU with AVX512_BF16/AMX) — on other CPUs bf16 is 4–8x slower than float32",
    )
    device: str = Field(
        default="auto",
        pattern=r"^(auto|cpu|cuda(:[0-9]+)?)$",
        description="auto (cuda if available), cpu, cuda, cuda:1…",
    )
    heldout_fraction: float = Field(default=0.03, gt=0, lt=1)
    max_minutes: float | None = Field(default=None, gt=0, description="end training gracefully after this long")
    seed: int = 42

    @field_validator("init_from")
    @classmethod
    def _saved_sae(cls, path: Path | None) -> Path | None:
        # checked here, before the LM loads and the norm is estimated (minutes on a CPU)
        if path is not None and not (Path(path) / "sae_weights.safetensors").is_file():
            raise ValueError(f"{path}: not a saved SAE directory (no sae_weights.safetensors)")
        return path

    @model_validator(mode="after")
    def _buffer_fits(self) -> SaeTrainConfig:
        # sae-lens: the mixing buffer (n_batches_in_buffer × usable context) must hold one train batch.
        usable = self.context_size - self.sink_positions
        if self.n_batches_in_buffer * usable < self.train_batch_size_tokens:
            raise ValueError(
                "n_batches_in_buffer × (context_size − sink_positions) = "
                f"{self.n_batches_in_buffer * usable} "
                f"must be ≥ train_batch_size_tokens = {self.train_batch_size_tokens}"
            )
        steps = self.training_tokens // self.train_batch_size_tokens
        if self.lr_warm_up_steps + self.lr_decay_steps > steps:
            raise ValueError(
                f"lr_warm_up_steps + lr_decay_steps = {self.lr_warm_up_steps + self.lr_decay_steps} "
                f"exceeds the run's {steps} steps"
            )
        return self


def resolve_training_precision(config: SaeTrainConfig) -> tuple[str, bool]:
    """(device, bf16 autocast) for this machine: `auto` asks cg_ray.hardware."""
    import torch

    from cg_ray.hardware import resolve_dtype

    device = config.device
    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    bf16 = resolve_dtype("auto", device) == "bfloat16" if config.bf16 == "auto" else config.bf16
    return device, bf16


def _runner_class() -> type:
    from sae_lens import LanguageModelSAETrainingRunner

    class DeadlineRunner(LanguageModelSAETrainingRunner):
        """Hands the trainer our norm estimate, logs progress with the dead-latent count, and ends
        `fit()` cleanly at a wall-clock deadline by lowering the trainer's sample target."""

        deadline: float | None = None
        stopped_early_at: int | None = None
        trained_samples: int | None = None
        scaling_factor: float | None = None

        def run_trainer_with_interruption_handling(self, trainer: SAETrainer) -> TrainingSAE:
            if self.scaling_factor is not None:
                trainer.activation_scaler.scaling_factor = self.scaling_factor
            stop = threading.Event()

            def watch() -> None:
                last_log = time.monotonic()
                while not stop.wait(5.0):
                    if time.monotonic() - last_log >= 120:
                        last_log = time.monotonic()
                        dead = int(trainer.dead_neurons.sum())
                        log.info(
                            "%d / %d tokens; %d latents silent for > %d steps",
                            trainer.n_training_samples,
                            trainer.cfg.total_training_samples,
                            dead,
                            trainer.cfg.dead_feature_window,
                        )
                    if self.deadline is not None and time.monotonic() > self.deadline:
                        self.stopped_early_at = trainer.n_training_samples
                        trainer.cfg.total_training_samples = trainer.n_training_samples
                        log.warning("time limit reached: ending training at %d tokens", trainer.n_training_samples)
                        return

            watcher = threading.Thread(target=watch, daemon=True)
            watcher.start()
            try:
                return super().run_trainer_with_interruption_handling(trainer)
            finally:
                stop.set()
                self.trained_samples = trainer.n_training_samples  # whole batches: may pass the target

    return DeadlineRunner


def train(config: SaeTrainConfig, data_dir: Path, out: Path, *, work_dir: Path, overwrite: bool = False) -> Path:
    """Train and write an sae-lens on-disk SAE (cfg.json + sae_weights.safetensors) plus training.json."""
    import datasets
    import torch

    from cg_ray.catalog import resolve_model
    from cg_ray.sae_training.corpus import split_corpus

    os.environ.setdefault("WANDB_MODE", "disabled")
    torch.manual_seed(config.seed)
    model_dir = str(resolve_model(config.model))
    train_docs, heldout_docs = split_corpus(data_dir, config.heldout_fraction)
    log.info("corpus: %d train documents, %d held out", len(train_docs), len(heldout_docs))
    dataset = datasets.Dataset.from_dict({"text": train_docs}).shuffle(seed=config.seed)
    if config.skip_tokens:
        dataset = _skip_documents(dataset, model_dir, config.skip_tokens)

    from transformers import AutoConfig

    d_in = int(AutoConfig.from_pretrained(model_dir).hidden_size)
    device, bf16 = resolve_training_precision(config)
    log.info("training on %s, bf16 autocast %s", device, bf16)
    runner_cfg = _runner_config(config, model_dir, d_in, device, bf16, work_dir)
    runner = _runner_class()(runner_cfg, override_dataset=dataset)
    mean, scale = _activation_statistics(runner, config.n_batches_for_norm_estimate)
    runner.scaling_factor = scale
    if config.init_from is not None:
        _load_unfolded(runner.sae, config.init_from, scale)
    else:
        with torch.no_grad():
            runner.sae.b_dec.data.copy_((mean * scale).to(runner.sae.b_dec.dtype))
    started = time.monotonic()
    if config.max_minutes is not None:
        runner.deadline = started + 60 * config.max_minutes
    runner.run()
    seconds = time.monotonic() - started
    tokens = runner.trained_samples or config.training_tokens  # set when fit() returns, deadline or not
    stats = {
        "config": config.model_dump(mode="json"),
        "model_dir": model_dir,
        "corpus_documents": {"train": len(train_docs), "heldout": len(heldout_docs)},
        "trained_tokens": tokens,
        "warm_start_from": str(config.init_from) if config.init_from else None,
        "norm_scaling_factor": scale,
        "stopped_early": runner.stopped_early_at is not None,
        "seconds": round(seconds, 1),
        "tokens_per_second": round(tokens / seconds, 1),
        "final_window_l0": runner.sae.cfg.metadata.l0,
        "final_window_dead_latents": runner.sae.cfg.metadata.num_dead_features,
    }
    with atomic_directory(out, overwrite=overwrite) as tmp:
        for name in ("cfg.json", "sae_weights.safetensors"):
            shutil.copy2(work_dir / "final" / name, tmp / name)
        write_document(tmp / TRAINING_FILE, TrainingStats, stats)
    log.info("trained %d tokens in %.0f s; SAE at %s", tokens, seconds, out)
    return out


def _runner_config(config: SaeTrainConfig, model_dir: str, d_in: int, device: str, bf16: bool, work_dir: Path) -> Any:
    """sae-lens's runner settings: a TopK SAE on one layer's residual stream, the corpus given in memory."""
    from sae_lens import LanguageModelSAERunnerConfig, LoggingConfig, TopKTrainingSAEConfig

    return LanguageModelSAERunnerConfig(
        sae=TopKTrainingSAEConfig(
            d_in=d_in,
            d_sae=config.d_sae,
            k=config.k,
            normalize_activations="expected_average_only_in",
            dtype="float32",
            device=device,
        ),
        model_name=model_dir,
        model_class_name="AutoModelForCausalLM",
        hook_name=f"model.layers.{config.layer}",
        dataset_path=model_dir,  # unused: override_dataset below; sae-lens wants a non-empty string
        is_dataset_tokenized=False,
        streaming=False,
        context_size=config.context_size,
        seqpos_slice=(config.sink_positions, None),
        exclude_special_tokens=True,
        prepend_bos=True,
        n_batches_in_buffer=config.n_batches_in_buffer,
        store_batch_size_prompts=config.store_batch_size_prompts,
        train_batch_size_tokens=config.train_batch_size_tokens,
        training_tokens=config.training_tokens,
        n_batches_for_norm_estimate=config.n_batches_for_norm_estimate,
        lr=config.lr,
        lr_warm_up_steps=config.lr_warm_up_steps,
        lr_decay_steps=config.lr_decay_steps,
        dead_feature_window=config.dead_feature_window,
        autocast=bf16,
        autocast_lm=bf16,
        device=device,
        seed=config.seed,
        logger=LoggingConfig(log_to_wandb=False),
        n_checkpoints=0,
        checkpoint_path=None,
        output_path=str(work_dir / "final"),
        verbose=True,
    )


def _activation_statistics(runner: Any, n_batches: int) -> tuple[Any, float]:
    """(mean activation, sae-lens' norm scaling factor sqrt(d_in) / mean ‖x‖) over the first batches."""
    import torch

    total = None
    norm_sum = 0.0
    count = 0
    with torch.no_grad():
        for _ in range(n_batches):
            batch = runner.activations_store.next_batch().float()
            total = batch.sum(0) if total is None else total + batch.sum(0)
            norm_sum += float(batch.norm(dim=-1).sum())
            count += batch.shape[0]
    assert total is not None
    scale = runner.sae.cfg.d_in**0.5 / (norm_sum / count)
    log.info("activation statistics from %d activations (norm scaling factor %.4g)", count, scale)
    return total / count, scale


def _load_unfolded(sae: Any, directory: Path, scale: float) -> None:
    """Load a saved (norm-folded) SAE into the training SAE, undoing sae-lens' fold with `scale`:
    the fold multiplied W_enc by it and divided W_dec and b_dec by it."""
    import torch
    from safetensors.torch import load_file

    weights = load_file(str(Path(directory) / "sae_weights.safetensors"))
    unfold = {"W_enc": 1 / scale, "W_dec": scale, "b_dec": scale, "b_enc": 1.0}
    with torch.no_grad():
        for name, factor in unfold.items():
            param = getattr(sae, name)
            if name not in weights or weights[name].shape != param.shape:
                raise ConfigError(f"{directory}: {name} missing or not of this SAE's shape {tuple(param.shape)}")
            param.data.copy_((weights[name].float() * factor).to(param.dtype))
    log.info("warm start from %s", directory)


def _skip_documents(dataset: Any, model_dir: str, skip_tokens: int) -> Any:
    """Drop the leading documents (in training order) until `skip_tokens` tokens are passed."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    lengths = [len(ids) for ids in tokenizer(list(dataset["text"]), add_special_tokens=False)["input_ids"]]
    first, seen = 0, 0
    while seen < skip_tokens:
        if first == len(lengths):
            raise ConfigError(f"skip_tokens={skip_tokens} passes all {seen} training tokens")
        seen += lengths[first]
        first += 1
    log.info("skipping %d documents (%d tokens); %d tokens left", first, seen, sum(lengths[first:]))
    return dataset.select(range(first, len(lengths)))
