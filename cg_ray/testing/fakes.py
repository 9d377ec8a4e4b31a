"""A fast, deterministic stand-in for the reader, behind the same interface (the `Reader` Protocol of
cg_ray.activations.protocol, plus `from_config`), so unit tests of the pipeline and the service run in milliseconds.
The real reader has its own tests; this never ships as a default anywhere.

Each lower-cased word hashes to a concept; s̃ is the word's count divided by the number of words.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np


@dataclass(frozen=True)
class FakeRowActs:
    concept_ids: np.ndarray
    concept_acts: np.ndarray
    n_tokens: int


def word_concept(word: str, d_sae: int) -> int:
    return int.from_bytes(hashlib.blake2b(word.encode(), digest_size=4).digest(), "little") % d_sae


class HashingReader:
    def __init__(self, d_sae: int = 256) -> None:
        self.d_sae = d_sae

    @classmethod
    def from_config(cls, config: Any) -> HashingReader:
        del config
        return cls()

    def read(
        self,
        texts: Sequence[str],
        *,
        count_from: Sequence[int] | None = None,
        pool: str = "mean",
        span_tokens: int | None = None,
        **_: Any,
    ) -> list[FakeRowActs]:
        """As the real reader: with `count_from`, only the words of text[offset:] (at most `span_tokens`)
        count; `pool="max"` gives each present word's concept 1.0."""
        out = []
        for i, text in enumerate(texts):
            words = (text if count_from is None else text[count_from[i] :]).lower().split()
            if count_from is not None and span_tokens is not None:
                words = words[:span_tokens]
            counts: dict[int, int] = {}
            for w in words:
                c = word_concept(w, self.d_sae)
                counts[c] = counts.get(c, 0) + 1
            ids = np.array(sorted(counts), dtype=np.int32)
            values = [1.0 if pool == "max" else counts[c] / len(words) for c in ids]
            acts = np.array(values, dtype=np.float32) if words else np.zeros(0, np.float32)
            out.append(FakeRowActs(ids, acts, len(words)))
        return out

    def describe(self) -> dict[str, Any]:
        return {"model": "hashing-fake", "d_sae": self.d_sae}

    def plan(self, total_tokens: int) -> None:
        del total_tokens  # nothing to compile


class SlowHashingReader(HashingReader):
    """The hashing fake with a fixed delay per call, so a test can interrupt a run half-way."""

    DELAY_S = 0.5

    def read(self, texts: Sequence[str], **kwargs: Any) -> list[FakeRowActs]:
        import time

        time.sleep(self.DELAY_S)
        return super().read(texts, **kwargs)


class SaltedHashingReader(HashingReader):
    """The hashing fake as several readers, told apart by the config's `sae` (as `cg-ray sensitivity` names
    them): the SAE name salts the word → concept hash, so two readers give the same rows different concept ids
    (as two SAEs do); `blind:S` also never sees words containing S, so a finding carried by them is lost."""

    D_SAE = 2048

    def __init__(self, sae: str = "default") -> None:
        super().__init__(self.D_SAE)
        self.sae = sae
        self.blind = sae.removeprefix("blind:") if sae.startswith("blind:") else None

    @classmethod
    def from_config(cls, config: Any) -> SaltedHashingReader:
        return cls(str(getattr(config, "sae", "default")))

    def read(self, texts: Sequence[str], **kwargs: Any) -> list[FakeRowActs]:
        salt = "" if self.sae == "default" else f"{self.sae}|"
        seen = [" ".join(salt + w for w in t.split() if self.blind is None or self.blind not in w) for t in texts]
        return super().read(seen, **kwargs)

    def describe(self) -> dict[str, Any]:
        return {"model": "hashing-fake", "d_sae": self.d_sae, "sae": {"spec": self.sae}}
