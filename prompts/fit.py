"""Turning prompt segments into tokens within a budget: pure, given a tokenizer.

Order of sacrifice when the prompt is too long: other files' context first (the oldest
first), then the suffix down to its share (its end is cut: the lines nearest the cursor
matter most), then the prefix from the left (the lines nearest the cursor are kept).
"""

from __future__ import annotations

from collections.abc import Callable

from prompts.templates import CONTEXT, PREFIX, SUFFIX, PromptParts, Special, Text


class PromptError(ValueError):
    """A prompt that cannot be built: empty, or a special token missing from the vocabulary."""


def fit_prompt(parts: PromptParts, tokenize: Callable[[str], list[int]],
               special_id: Callable[[str], int | None], budget: int,
               suffix_share: float = 0.25) -> list[int]:
    """Token ids of `parts` with at most `budget` tokens; raises PromptError if empty."""
    if budget < 1:
        raise PromptError(f"no room for a prompt (budget {budget} tokens)")
    toks: list[list[int]] = []
    for seg in parts.segments:
        if isinstance(seg, Special):
            tid = special_id(seg.text)
            if tid is None:
                raise PromptError(f"the model has no special token {seg.text!r} (family {parts.family})")
            toks.append([tid])
        else:
            toks.append(tokenize(seg.text) if seg.text else [])
    roles = [seg.role if isinstance(seg, Text) else "special" for seg in parts.segments]
    total = sum(map(len, toks))
    for i, role in enumerate(roles):  # context: drop whole files, the first (oldest) first
        if total <= budget:
            break
        if role == CONTEXT:
            total -= len(toks[i])
            toks[i] = []
    if total > budget:
        for i, role in enumerate(roles):
            if role == SUFFIX:
                # cut just enough, but never below its share of the budget
                keep = max(min(len(toks[i]), int(budget * suffix_share)), len(toks[i]) - (total - budget))
                total -= len(toks[i]) - keep
                toks[i] = toks[i][:keep]
    if total > budget:
        for i, role in enumerate(roles):
            if role == PREFIX:
                cut = min(len(toks[i]), total - budget)
                total -= cut
                toks[i] = toks[i][cut:]
    ids = [t for seg in toks for t in seg]
    if total > budget:  # only fixed text and special tokens left: keep the end
        ids = ids[-budget:]
    if not ids:
        raise PromptError("empty prompt: nothing before or after the cursor")
    return ids
