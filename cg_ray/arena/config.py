"""Arena options, validated once at the edge (CLI flags or the `cg-ray arena` YAML)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator


class _Frozen(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class TiePolicy(_Frozen):
    """How ties count. Wins score 1 and losses 0 always.

    - `tie`: "half" scores both models 0.5; "drop" removes the battle.
    - `bothbad` ("tie (bothbad)"): "drop" removes it; "zero" scores both models 0 (both lost); "half" treats
      it as a plain tie. Ratings cannot express "both lost" (it says nothing about which model is stronger),
      so for ratings "zero" drops the battle.
    """

    tie: Literal["half", "drop"] = "half"
    bothbad: Literal["drop", "zero", "half"] = "drop"


class RatingsConfig(_Frozen):
    """Bradley–Terry and Elo ratings on the `scale`·log_`base` scale, anchored at `anchor_rating`."""

    scale: float = Field(400.0, gt=0, description="rating points per factor `base` in the odds")
    base: float = Field(10.0, gt=1, description="odds base of the scale (400·log10 by default)")
    anchor_rating: float = Field(1000.0, description="mean rating, or the anchor model's rating")
    anchor_model: str | None = Field(None, description="model fixed at anchor_rating (default: the mean is)")
    prior: float = Field(
        0.0,
        ge=0,
        description="BT only: pseudo-battles (half won, half lost) of every model against a virtual "
        "opponent at the mean; 0 = plain MLE, which needs every model to have won and lost something",
    )
    elo_k: float = Field(4.0, gt=0, description="Elo K factor")
    elo_permutations: int = Field(
        100, ge=0, description="Elo averaged over this many seeded shuffles of the battles; 0 = file order"
    )
    bootstrap: int = Field(1000, ge=0, description="bootstrap resamples of the battles for CIs (0 = none)")
    confidence: float = Field(0.95, gt=0, lt=1, description="two-sided percentile CI level")
    seed: int = Field(0, description="seed of the Elo shuffles and the bootstrap")


class SelectionConfig(_Frozen):
    """Models of interest: the named ones, or all with at least `min_battles` battles."""

    models: tuple[str, ...] = ()
    min_battles: int | None = Field(None, ge=1)

    @model_validator(mode="after")
    def _one_way(self) -> SelectionConfig:
        if bool(self.models) == (self.min_battles is not None):
            raise ValueError("give either models or min_battles (exactly one)")
        return self


class ArenaConfig(_Frozen):
    """The arena part of a `cg-ray arena CONFIG` job (reader and metrics options live beside it)."""

    battles: str = Field(description="battles source: a file, a dataset directory, or hf:NAME")
    split: str = "train"
    skip_invalid: bool = False
    benchmark: str = Field("arena", min_length=1, description="benchmark name of the per-model rows")
    selection: SelectionConfig
    tie_policy: TiePolicy = TiePolicy()
    ratings: RatingsConfig = RatingsConfig()
    weighting: Literal["mean", "own"] = Field("mean", description="head-to-head weights: both rows' s̃, or A's own")
