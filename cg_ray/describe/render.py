"""Tokens and token-list labels as readable words: whitespace gets a name, punctuation is recognised.

The shipped default SAE's labels are token lists such as `',' | '.' | '\\n'` or `'sqrt{' ('{' | '[')`;
a label made only of such quoted tokens is parsed back into its tokens, so a description can say "line
breaks" instead of `'\\n'` and can tell that a label is punctuation / whitespace only (a weak label).
"""

from __future__ import annotations

import ast
import re
import unicodedata

_QUOTED = re.compile(r"""'(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*\"""")
_SEPARATORS = re.compile(r"[\s|()]+")


CONTEXT_MARKER = " in text about "  # `cg-ray sae label`: "<tokens> in text about <context words>"


def is_token_label(label: str | None) -> bool:
    """A label written by `cg-ray sae label` (a token list, or tokens with context words), not free text."""
    return bool(label) and (label_tokens(label) is not None or CONTEXT_MARKER in str(label))


def label_token_names(label: str | None) -> set[str] | None:
    """The readable names of the tokens a generated label names ("line breaks", "“sqrt”"), else None."""
    tokens = label_tokens(label)
    if tokens is not None:
        return {render_token(t) for t in tokens}
    if label and CONTEXT_MARKER in label:
        return {name.strip() for name in label.split(CONTEXT_MARKER, 1)[0].split(",") if name.strip()}
    return None


def label_tokens(label: str | None) -> list[str] | None:
    """The tokens of a token-list label, or None when the label is free text (e.g. a Neuronpedia sentence)."""
    if not label or label.startswith("("):
        return None
    found = _QUOTED.findall(label)
    if not found or _SEPARATORS.sub("", _QUOTED.sub("", label)):
        return None
    tokens: list[str] = []
    for quoted in found:
        try:
            value = ast.literal_eval(quoted)
        except (ValueError, SyntaxError):
            return None
        if isinstance(value, str) and value not in tokens:
            tokens.append(value)
    return tokens


def is_symbolic(token: str) -> bool:
    """Whitespace, punctuation or symbols only (no letter, no digit)."""
    return all(ch.isspace() or unicodedata.category(ch)[0] in "PS" for ch in token)


def whitespace_name(token: str) -> str | None:
    if token == "" or token.strip():
        return None
    newlines = token.count("\n")
    if newlines >= 2:
        return "blank lines"
    if newlines == 1:
        return "indented lines" if token.index("\n") < len(token) - 1 else "line breaks"
    if "\t" in token:
        return "tabs"
    return "spaces"


def render_token(token: str) -> str:
    """One token for a sentence: whitespace by name, anything else quoted without its leading space."""
    name = whitespace_name(token)
    if name is not None:
        return name
    return f"“{token.strip()}”"


def render_tokens(tokens: list[str], limit: int = 4) -> str:
    out: list[str] = []
    for t in tokens:
        r = render_token(t)
        if r not in out:
            out.append(r)
        if len(out) == limit:
            break
    return ", ".join(out)


def symbolic_phrase(tokens: list[str]) -> str:
    """A readable phrase for a punctuation / whitespace token list: "punctuation (“,” “.”) and line breaks"."""
    spaces = [n for t in tokens if (n := whitespace_name(t)) is not None]
    punct = [t.strip() for t in tokens if whitespace_name(t) is None and t.strip()]
    parts = []
    if punct:
        parts.append("punctuation and symbols (" + " ".join(f"“{p}”" for p in dict.fromkeys(punct)) + ")")
    parts += list(dict.fromkeys(spaces))
    return " and ".join(parts) if parts else "whitespace"
