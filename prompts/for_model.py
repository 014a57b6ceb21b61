"""Prompts for a loaded model: its family from GGUF metadata and vocabulary, and its tokens."""

from __future__ import annotations

from prompts.fit import PromptError, fit_prompt
from prompts.templates import PromptParts, detect_family


def family_for(engine) -> str:
    """The FIM family of an Engine, from its special tokens and GGUF metadata."""
    fim_pre = engine.special_ids().get("fim_pre")
    return detect_family(lambda t: engine.special_token(t) is not None,
                         engine.token_text(fim_pre) if fim_pre is not None else None,
                         engine.metadata("general.architecture"))


def prompt_tokens(engine, parts: PromptParts, budget: int, suffix_share: float = 0.25) -> list[int]:
    """Token ids of `parts` within `budget`; plain text never turns into control tokens. Models
    trained with a BOS token (Gemma) get it first, which also makes an empty file a prompt."""
    bos = engine.bos_for_prompt()
    lead = [bos] if bos is not None else []
    try:
        ids = fit_prompt(parts, lambda s: engine.tokenize(s, parse_special=False), engine.prompt_special_id,
                         budget - len(lead), suffix_share)
    except PromptError:
        if not lead:
            raise
        ids = []
    return lead + ids
