"""LLM-as-a-judge: a documented prompt, and a parser of the judge's verdict.

The judge call itself is a second generation pass through the run's generation backend (same vLLM
engine class, same streaming Ray Data graph): ``cg_ray.pipeline.judge_pass.to_request`` turns rows scored
by ``judge`` into judge prompts, the backend generates ``response``, and ``from_request`` moves that text
into ``judge_output`` of the original rows, which the ``judge`` scorer then parses.

The prompt follows MT-Bench's single-answer grading (Zheng et al., 2023): the judge explains briefly, then
rates 1–10 as ``[[rating]]``; the score is rating / 10 (as in the MT-Bench judgments of the shared data).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

JUDGE_OUTPUT = "judge_output"

JUDGE_PROMPT = """\
[Instruction]
Please act as an impartial judge and evaluate the quality of the response provided by an AI assistant to \
the user question displayed below. {reference_instruction}Your evaluation should consider correctness, \
helpfulness, relevance, depth and level of detail. Begin your evaluation with a short explanation. Be as \
objective as possible. After providing your explanation, you must rate the response on a scale of 1 to \
10 by strictly following this format: "[[rating]]", for example: "Rating: [[5]]".

[Question]
{question}
{reference_block}
[The Start of Assistant's Answer]
{response}
[The End of Assistant's Answer]"""

_REFERENCE_INSTRUCTION = "Compare the assistant's answer with the reference answer; identify and correct any mistakes. "
_RATING = re.compile(r"\[\[\s*(\d+(?:\.\d+)?)\s*\]\]")
_RATING_LOOSE = re.compile(r"rating\s*:?\s*(\d+(?:\.\d+)?)\s*(?:/\s*10)?", re.IGNORECASE)


def judge_prompt(question: str, response: str, reference: Sequence[str] = ()) -> str:
    ref = "\n".join(reference)
    return JUDGE_PROMPT.format(
        question=question,
        response=response,
        reference_instruction=_REFERENCE_INSTRUCTION if ref else "",
        reference_block=f"\n[The Start of Reference Answer]\n{ref}\n[The End of Reference Answer]\n" if ref else "",
    )


def parse_verdict(judge_output: str | None) -> float | None:
    """``[[7]]`` -> 0.7. The last ``[[n]]`` wins (judges sometimes quote the format first); a plain
    ``Rating: 7`` is accepted as a fallback; ratings outside 1–10 do not parse."""
    if not judge_output:
        return None
    matches = _RATING.findall(judge_output) or _RATING_LOOSE.findall(judge_output)
    if not matches:
        return None
    rating = float(matches[-1])
    return rating / 10.0 if 1.0 <= rating <= 10.0 else None


def judge(response: str | None, reference: Sequence[str], choices: Sequence[str] | None = None) -> float | None:
    """The ``judge`` scorer: ``response`` here is the judge's output (``apply.py`` passes ``judge_output``)."""
    return parse_verdict(response)
