"""The activation stage: a Ray Data actor that turns a text column into sparse s̃ columns.

Each actor loads the reader (model + SAE) once in its constructor; batches then only pay the forward
pass. The reader is built by a factory named as "module:attr" so tests can run the real stage with a
fast fake behind the same interface (the `Reader` Protocol of cg_ray.activations.protocol).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, Literal, TypedDict

import pyarrow as pa

from cg_ray import schemas as S
from cg_ray.activations.config import DEFAULT_READER_FACTORY, ReaderConfig
from cg_ray.activations.packing import pack_concepts
from cg_ray.activations.protocol import reader_from_config, resolve

if TYPE_CHECKING:
    import ray.data

    from cg_ray.generation.config import StageResources

__all__ = ["ReaderStage", "map_reader_stage", "planned_tokens", "reader_from_config", "resolve"]

NODE_COLUMN = "_node"
D_SAE_COLUMN = "_d_sae"  # carried per row so the driver learns d_sae without loading the SAE
ACTOR_COLUMN = "_reader_actor"  # JSON: the resolved reader (dtype, device) and the hardware of its actor

# English BPE tokenizers average about 4 characters a token: text lengths, known before anything is read,
# then give the order of magnitude `compile: auto` needs without tokenizing on the driver.
CHARS_PER_TOKEN = 4


class ReadOptions(TypedDict, total=False):
    """Keyword options of `Reader.read` a stage passes on (response-span reading: `cg-ray diff-models`)."""

    pool: Literal["mean", "max"]
    span_tokens: int | None
    add_special_tokens: bool  # False for texts already holding them (a chat template's)


def planned_tokens(characters: int, max_actors: int) -> int:
    """One reader actor's estimated share of the tokens in `characters` of text, with the pool at its
    largest (the work is split over the actors; each compiles, or not, for its own share)."""
    return characters // CHARS_PER_TOKEN // max(max_actors, 1)


class ReaderStage:
    """map_batches UDF (batch_format="pyarrow"): adds n_tokens, concept_ids, concept_acts."""

    def __init__(
        self,
        reader_config: ReaderConfig,
        text_column: str,
        factory: str = DEFAULT_READER_FACTORY,
        count_from_column: str | None = None,
        read_options: ReadOptions | None = None,
        planned_tokens: int | None = None,
    ) -> None:
        import ray

        self.reader = reader_from_config(reader_config, factory)
        # The tokens this actor is expected to read in all (an estimate): `compile: auto` then weighs the
        # compilation against the whole job, not against the first batch alone.
        if planned_tokens is not None:
            self.reader.plan(int(planned_tokens))
        self.text_column = text_column
        # Optional: a column of character offsets (text before it is context only: `read(count_from=)`)
        # and keyword options of `read` (pool, span_tokens). Unset, the stage reads exactly as before.
        self.count_from_column = count_from_column
        self.read_options: ReadOptions = read_options.copy() if read_options else {}
        from cg_ray.hardware import hardware_info

        self.node = ray.get_runtime_context().get_node_id()  # where the work ran, for the manifest
        described = self.reader.describe()
        # `dtype: auto` is resolved inside the actor, on the hardware it runs on: record what it became.
        self.actor = json.dumps(
            {
                "node": self.node,
                "dtype": described.get("dtype"),
                "device": described.get("device"),
                "hardware": hardware_info().as_dict(),
                "sae_weights": (described.get("sae") or {}).get("weights_sha256"),
            },
            sort_keys=True,
        )

    def __call__(self, batch: pa.Table) -> pa.Table:
        texts = batch.column(self.text_column).to_pylist()
        if self.count_from_column is None:
            acts = self.reader.read(texts, **self.read_options)
        else:
            count_from = batch.column(self.count_from_column).to_pylist()
            acts = self.reader.read(texts, count_from=count_from, **self.read_options)
        packed = pack_concepts(acts)
        out = (
            batch.append_column(S.N_TOKENS, packed.n_tokens)
            .append_column(S.CONCEPT_IDS, packed.concept_ids)
            .append_column(S.CONCEPT_ACTS, packed.concept_acts)
        )
        out = out.append_column(D_SAE_COLUMN, pa.array([int(self.reader.d_sae)] * out.num_rows, pa.int32()))
        out = out.append_column(ACTOR_COLUMN, pa.array([self.actor] * out.num_rows, pa.string()))
        return out.append_column(NODE_COLUMN, pa.array([self.node] * out.num_rows, pa.string()))


def map_reader_stage(ds: ray.data.Dataset, resources: StageResources, constructor: dict[str, Any]) -> ray.data.Dataset:
    """`ds` through a pool of `ReaderStage` actors sized by `resources`, in pyarrow batches (the one way the
    run and `read_texts` start the reader); `constructor`: ReaderStage's arguments."""
    import ray.data

    return ds.map_batches(
        ReaderStage,
        fn_constructor_kwargs=constructor,
        compute=ray.data.ActorPoolStrategy(min_size=resources.min_actors, max_size=resources.max_actors),
        num_cpus=resources.num_cpus,
        num_gpus=resources.num_gpus,
        batch_size=resources.batch_size,
        batch_format="pyarrow",
        memory=resources.memory_ask,
    )
