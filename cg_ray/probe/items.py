"""The records a probe passes between its steps: the gaps it probes, the item pairs written for them, and
what each step found. Plain frozen dataclasses, so every step (generators, checks, answering, confirmation)
can be tested alone and the parquet files are a flat view of them."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from cg_ray.probe.selection import Inflation

GapKind = Literal["mode", "concept"]
Role = Literal["target", "control"]
ROLES: tuple[Role, Role] = ("target", "control")


@dataclass(frozen=True)
class Gap:
    """One gap of a run, as a generator needs it: what it is about and how the suite asks its questions."""

    gap_id: str  # "mode:3" (a failure mode's rank) or "concept:4077"
    kind: GapKind
    concept_ids: tuple[int, ...]  # the reader's concepts that define it (a mode's members; a concept alone)
    description: str  # the run's words for it ("Rows with “$”")
    terms: tuple[str, ...]  # words and phrases its rows share (may be empty)
    examples: tuple[str, ...]  # prompts of suite rows that exhibit it (a few, for the generator's prompt)
    benchmark: str  # the suite benchmark most of its rows belong to
    scorer: str  # that benchmark's scorer: the items are scored the way the suite is
    effect: float | None  # the run's held-out estimate (gaps.py), score minus the cells' (negative: weaker)
    confirmed: bool  # confirmed by the run itself (on the suite's own rows)
    n_rows: int
    # How much the run's confirmation inflates `effect` (selection.py); None: not confirmed, or unknown.
    inflation: Inflation | None = None


@dataclass(frozen=True)
class ItemPair:
    """A target item that exhibits a gap and its matched control: the same task, format and difficulty
    without the gap's property. `request_id` names the generator call that wrote it: pairs of one call are
    one cluster in the confirmation."""

    gap_id: str
    pair_id: str  # unique within a probe: f"{gap_id}/{index}"
    generator: str  # "endpoint:MODEL", "backend:MODEL" or "family:NAME"
    request_id: str
    seed: int
    target_prompt: str
    target_reference: str
    control_prompt: str
    control_reference: str
    scorer: str  # a name of cg_ray.scoring (numeric, exact_match, multiple_choice, ...)

    def side(self, role: Role) -> tuple[str, str]:
        """(prompt, reference) of the target or the control item."""
        if role == "target":
            return self.target_prompt, self.target_reference
        return self.control_prompt, self.control_reference

    def item_id(self, role: Role) -> str:
        """The id of one of its two items: how answers, exports and items.parquet name it."""
        return item_id(self.pair_id, role)


def item_id(pair_id: str, role: Role) -> str:
    """The one place an item's id is made from its pair's id and its role."""
    return f"{pair_id}/{role}"


@dataclass
class GenerationOutcome:
    """What a generator produced for one gap, and what it had to throw away on the way (counted, never
    silently): answers that were not the JSON asked for, and pairs whose reference answer failed its check."""

    pairs: list[ItemPair] = field(default_factory=list)
    requests: int = 0
    malformed: int = 0  # answers that were not parseable JSON with the fields asked for
    wrong_reference: int = 0  # pairs whose reference failed its check (executed, or samples disagreed)
    note: str = ""  # e.g. "the generator could not express this gap"
    writer_requests: int = 0  # an LLM writer's requests whose pairs a family replaced (fallback): counted too
