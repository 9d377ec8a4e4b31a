"""The fallback order of descriptions, and readable rendering of token-list labels."""

from __future__ import annotations

from cg_ray.describe.descriptions import Candidate, Facts, describe_concept
from cg_ray.describe.enrichment import Enriched
from cg_ray.describe.render import label_token_names, label_tokens, render_token, symbolic_phrase

GEOMETRY = Enriched(1, "type", "Geometry", 30, 40, 100, 1000, 2.4, 1e-7, 1e-6)


def test_label_tokens_parse_the_default_sae_labels() -> None:
    assert label_tokens("',' | '.' | '\\n'") == [",", ".", "\n"]
    assert label_tokens("'sqrt{' ('{' | '[' | '+')") == ["sqrt{", "{", "[", "+"]
    assert label_tokens("References to geometry and shapes") is None
    assert label_tokens("(inactive on the labelling corpus)") is None


def test_whitespace_is_named_never_shown_bare() -> None:
    assert render_token("\n") == "line breaks" and render_token("\n    ") == "indented lines"
    assert render_token("\n\n") == "blank lines" and render_token(" books") == "“books”"
    assert symbolic_phrase([",", ".", "\n"]) == "punctuation and symbols (“,” “.”) and line breaks"


def test_order_label_then_enrichment_then_ngrams() -> None:
    words = describe_concept(
        1, Facts(label="'books' | 'house'", enriched=[GEOMETRY], spans=["the triangle"], tokens=[])
    )
    assert words.source == "label" and words.text.startswith("Tokens such as “books”, “house”")
    assert "over-represented in type = Geometry (×2.4)" in words.text
    here = describe_concept(1, Facts(label="'books' | 'house'", enriched=[], spans=[], tokens=[" house", "\n"]))
    assert here.text == "Tokens such as “books”, “house”; here on “house”, line breaks."
    # a label none of whose tokens the concept fires on in this suite describes other text: the suite's
    # own evidence goes first (the enrichment, else the in-suite tokens)
    off = describe_concept(1, Facts(label="'books' | 'house'", enriched=[GEOMETRY], spans=[], tokens=[" grams"]))
    assert off.source == "enrichment" and off.text.startswith("Rows with type = Geometry")
    off = describe_concept(1, Facts(label="'books' | 'house'", enriched=[], spans=[], tokens=[" grams"]))
    assert off.source == "ngrams" and off.text == "Tokens such as “grams”."
    # a punctuation-only label loses to the enrichment
    punct = describe_concept(
        1, Facts(label="',' | '.' | '\\n'", enriched=[GEOMETRY], spans=["the triangle"], tokens=[])
    )
    assert punct.source == "enrichment" and punct.text == "Rows with type = Geometry (75% of its rows, ×2.4)."
    # … and, without enrichment, to the in-suite spans when they hold words
    spans = describe_concept(1, Facts(label="',' | '.'", enriched=[], spans=[")", "the triangle"], tokens=[]))
    assert spans.source == "ngrams" and spans.text == "Text such as “the triangle”."
    # nothing better: the punctuation label, named readably, never a bare token list
    last = describe_concept(1, Facts(label="',' | '\\n'", enriched=[], spans=[")"], tokens=[")"]))
    assert last.source == "label" and last.text == "Punctuation and symbols (“,”) and line breaks; here on “)”."
    assert "'\\n'" not in last.text
    none = describe_concept(1, Facts(label=None, enriched=[], spans=[], tokens=[]))
    assert none.source == "none"


def test_llm_explanation_wins_only_with_a_detection_score_that_beats_the_others() -> None:
    def run(llm: float, label: float | None) -> str:
        scored = [Candidate("llm", "Questions about triangles", True, llm)]
        if label is not None:
            scored.append(Candidate("label", "", True, label))
        return describe_concept(1, Facts(label="'books'", enriched=[], spans=[], tokens=[]), scored).source

    assert run(0.8, None) == "llm"
    assert run(0.8, 0.7) == "llm"
    assert run(0.8, 0.9) == "label"  # the label detects the concept better
    assert run(0.55, None) == "label"  # near chance: not trusted


def test_a_context_label_is_an_informative_label_and_gets_the_in_suite_tokens() -> None:
    label = "line breaks, “```” in text about python, import"
    assert label_tokens(label) is None  # not a bare token list …
    assert label_token_names(label) == {"line breaks", "“```”"}
    d = describe_concept(1, Facts(label=label, enriched=[GEOMETRY], spans=[], tokens=["\n"]))
    # … so it beats the enrichment, and says what it fires on here and where it is over-represented
    assert d.source == "label"
    assert d.text == (
        "Line breaks, “```” in text about python, import; here on line breaks; "
        "over-represented in type = Geometry (×2.4)."
    )
    free = describe_concept(1, Facts(label="Mentions of geometry", enriched=[], spans=[], tokens=["\n"]))
    assert free.text == "Mentions of geometry."  # a free-text label is not told which tokens it fired on


def test_terms_inside_the_activating_spans_lead_the_sentence() -> None:
    from cg_ray.describe.descriptions import span_first

    assert span_first(["see", "how many", "four"], ["How many pens", "four"]) == ["how many", "four", "see"]
    d = describe_concept(7, Facts(label=None, enriched=[], spans=["[asy] draw"], tokens=[], terms=["shown", "draw"]))
    assert d.source == "terms" and d.text.startswith("Rows with “draw”, “shown”")
