"""One short readable sentence per concept, from the best source available.

Order: an LLM explanation whose detection score is at least `LLM_MIN_SCORE` and at least that of every other
scored candidate (a tie in detection goes to the better fuzzing score); else the SAE's label when it says
something beyond punctuation / whitespace; else the metadata enrichment, never on a field the concept was
ranked adjusted for (its residual gap already took that field out: naming it would restate the metadata);
else the distinctive terms of the concept's rows (`cg_ray.profile.terms`); else the concept's top
spans / tokens in this suite when they contain words; else the punctuation / whitespace label or tokens, named readably
("line breaks", never a bare `'\\n'`). A token-list label (the default SAE's) gets the tokens it fires on in
this suite added; when the chosen source is not the enrichment, the best enriched value is added as context.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from cg_ray.describe.enrichment import Enriched
from cg_ray.describe.render import (
    is_symbolic,
    is_token_label,
    label_token_names,
    label_tokens,
    render_token,
    render_tokens,
    symbolic_phrase,
)

LLM_MIN_SCORE = 0.6  # balanced accuracy; 0.5 is chance


@dataclass(frozen=True)
class Candidate:
    source: str  # llm | label | terms | enrichment | ngrams | none
    text: str
    informative: bool = True  # False: punctuation / whitespace only
    detection_score: float | None = None  # on the rows the candidates are compared on
    fuzzing_score: float | None = None  # breaks ties in detection
    heldout_detection: float | None = None  # the winner's, on the other half of the rows: the one reported


def _cap(text: str) -> str:
    return text[:1].upper() + text[1:] if text else text


def label_candidate(label: str | None) -> Candidate | None:
    if not label or label.startswith("("):  # e.g. "(inactive on the labelling corpus)"
        return None
    tokens = label_tokens(label)
    if tokens is None:  # a free-text label (Neuronpedia explanation, user label file)
        return Candidate("label", _cap(label.strip()))
    if all(is_symbolic(t) for t in tokens):
        return Candidate("label", _cap(symbolic_phrase(tokens)), informative=False)
    return Candidate("label", f"Tokens such as {render_tokens(tokens)}")


def enrichment_candidate(enriched: Sequence[Enriched]) -> Candidate | None:
    if not enriched:
        return None
    parts = [f"{e.field} = {e.value} ({e.k / e.n_active:.0%} of its rows, ×{e.lift:.1f})" for e in enriched[:2]]
    return Candidate("enrichment", "Rows with " + " or ".join(parts))


def ngram_candidate(spans: Sequence[str], tokens: Sequence[str]) -> Candidate | None:
    worded = [s for s in spans if not is_symbolic(s)]
    if worded:
        return Candidate("ngrams", "Text such as " + ", ".join(f"“{s}”" for s in worded[:3]))
    worded_tokens = [t for t in tokens if not is_symbolic(t)]
    if worded_tokens:
        return Candidate("ngrams", f"Tokens such as {render_tokens(worded_tokens)}")
    if tokens:
        return Candidate("ngrams", _cap(symbolic_phrase(list(tokens))), informative=False)
    return None


def _at_least(c: Candidate, other: Candidate) -> bool:
    """c scores at least as well as `other` by detection; a tie goes to the better fuzzing score (to c when
    either has none)."""
    d, o = c.detection_score or 0.0, other.detection_score or 0.0
    if d != o:
        return d > o
    return c.fuzzing_score is None or other.fuzzing_score is None or c.fuzzing_score >= other.fuzzing_score


def choose(candidates: Sequence[Candidate | None]) -> Candidate | None:
    present = [c for c in candidates if c is not None]
    llm = [c for c in present if c.source == "llm" and c.detection_score is not None]
    others = [c for c in present if c.source != "llm" and c.detection_score is not None]
    for c in sorted(llm, key=lambda c: (-(c.detection_score or 0.0), -(c.fuzzing_score or 0.0))):
        if (c.detection_score or 0.0) >= LLM_MIN_SCORE and all(_at_least(c, o) for o in others):
            return c
    for source in ("label", "enrichment", "terms", "ngrams"):
        for c in present:
            if c.source == source and c.informative:
                return c
    for source in ("label", "ngrams"):
        for c in present:
            if c.source == source:
                return c
    return None


def span_first(terms: Sequence[str], spans: Sequence[str]) -> list[str]:
    """The terms, those inside the concept's activating spans first (the span up-weighting of the terms: the
    metrics rank terms over whole rows; `describe` knows where in a row the concept fires)."""
    lowered = [s.lower() for s in spans]
    return sorted(terms, key=lambda t: not any(t.lower() in s for s in lowered))


@dataclass(frozen=True)
class Facts:
    """What a concept's offline candidates are drawn from: its SAE label, its metadata enrichment, its top
    spans / tokens in this suite, its rows' distinctive terms and the fields its residual gap was adjusted for."""

    label: str | None
    enriched: Sequence[Enriched]
    spans: Sequence[str]
    tokens: Sequence[str]
    terms: Sequence[str] = ()
    adjusted_for: Sequence[str] = ()

    def enrichment(self) -> list[Enriched]:
        """The enrichment, never on a field the concept was adjusted for (naming it would restate the metadata)."""
        adjusted = set(self.adjusted_for)
        return [e for e in self.enriched if e.field not in adjusted]


@dataclass(frozen=True)
class Description:
    text: str
    source: str
    detection_score: float | None


def describe_concept(concept_id: int, facts: Facts, explanations: Sequence[Candidate] = ()) -> Description:
    """The concept's sentence. `explanations`: LLM (and other) candidates scored by `cg-ray explain`."""
    enriched = facts.enrichment()
    scored = {c.source: c for c in explanations}

    def with_score(c: Candidate) -> Candidate:
        s = scored.get(c.source)
        if s is None:
            return c
        return replace(
            c, detection_score=s.detection_score, fuzzing_score=s.fuzzing_score, heldout_detection=s.heldout_detection
        )

    candidates = [scored.get("llm")] + [with_score(c) for c in offline_candidates(facts)]
    best = choose(candidates)
    if best is None:
        return Description(f"Concept {concept_id} (no label, enrichment or in-suite tokens)", "none", None)
    text = best.text.rstrip(".")
    if best.source == "label" and is_token_label(facts.label) and facts.tokens:
        # a generated label comes from the SAE's labelling corpus: say what it fires on in this suite
        text += f"; here on {render_tokens(list(facts.tokens), limit=3)}"
    if best.source != "enrichment" and enriched:
        e = enriched[0]
        text += f"; over-represented in {e.field} = {e.value} (×{e.lift:.1f})"
    score = best.heldout_detection if best.heldout_detection is not None else best.detection_score
    return Description(text + ".", best.source, score)


def offline_candidates(facts: Facts) -> list[Candidate]:
    """The candidates besides an LLM's, in the order `choose` falls back on: the label, the distinctive terms,
    the enrichment (never on a field the concept was adjusted for), the in-suite spans / tokens. `cg-ray
    explain` judges exactly these, so that its choice is the one `describe` makes."""
    label, spans, tokens, terms = facts.label, facts.spans, facts.tokens, facts.terms
    from_label = label_candidate(label)
    named = label_token_names(label)
    if from_label is not None and named is not None and tokens and not named & {render_token(t) for t in tokens}:
        # the label's tokens come from the SAE's labelling corpus; none of them is what the concept fires
        # on in this suite, so the label would describe other text: the suite's own evidence goes first
        from_label = Candidate("label", from_label.text, informative=False)
    found = [
        from_label,
        Candidate("terms", "Rows with " + ", ".join(f"“{t}”" for t in span_first(terms, spans))) if terms else None,
        enrichment_candidate(facts.enrichment()),
        ngram_candidate(spans, tokens),
    ]
    return [c for c in found if c is not None]
