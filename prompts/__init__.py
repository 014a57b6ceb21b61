"""Prompt building: pure functions from (prefix, suffix, path, context) to prompt segments."""

from prompts.fit import PromptError, fit_prompt
from prompts.for_model import family_for, prompt_tokens
from prompts.templates import FAMILIES, ContextFile, PromptParts, build_prompt, detect_family

__all__ = ["FAMILIES", "ContextFile", "PromptError", "PromptParts", "build_prompt", "detect_family",
           "family_for", "fit_prompt", "prompt_tokens"]
