"""Prompt building: pure functions from (prefix, suffix, path) to prompt text."""

from prompts.templates import PromptParts, build_prompt, detect_family

__all__ = ["PromptParts", "build_prompt", "detect_family"]
