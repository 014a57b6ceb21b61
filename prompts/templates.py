"""FIM prompt families, found from the vocabulary's special tokens, not file names.

The default model (SmolLM2) has no FIM tokens, so it gets the prefix-only form with its
`<file_sep>` file header; the suffix is then used by post-processing, not the prompt.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class PromptParts:
    text: str
    stop: tuple[str, ...]
    family: str


def detect_family(has_token: Callable[[str], bool]) -> str:
    """The prompt family for a vocabulary; `has_token` says if a special token exists."""
    if has_token("<file_sep>") and has_token("<repo_name>"):
        return "smollm"
    return "prefix-only"


def _cut_prefix(prefix: str, max_chars: int) -> str:
    """Keep the end of the prefix, starting at a line boundary when one is near."""
    if len(prefix) <= max_chars:
        return prefix
    cut = prefix[-max_chars:]
    nl = cut.find("\n")
    return cut[nl + 1:] if 0 <= nl < len(cut) // 4 else cut


def build_prompt(family: str, prefix: str, suffix: str, path: str,
                 prefix_chars: int = 6000) -> PromptParts:
    """Prompt text and stop strings for one completion request."""
    body = _cut_prefix(prefix, prefix_chars)
    if family == "smollm":
        return PromptParts(f"<file_sep>{path}\n{body}", ("<file_sep>", "<|endoftext|>"), family)
    return PromptParts(body, (), family)
