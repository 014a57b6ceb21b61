"""Where suggestions may be asked for and what text may enter a prompt: per language, the
trigger mode, and files kept out (context.exclude). Pure functions of the settings."""

from __future__ import annotations

import functools
from collections.abc import Sequence

import pathspec

from lsp_server.settings import LANGUAGES, Settings


@functools.lru_cache(maxsize=8)
def _spec(patterns: tuple[str, ...]) -> pathspec.GitIgnoreSpec:
    return pathspec.GitIgnoreSpec.from_lines(patterns)


def excluded(path: str, patterns: Sequence[str]) -> bool:
    """A file whose text never enters a prompt: a pattern matches its name or a folder on its
    path, as in .gitignore."""
    if not path or not patterns:
        return False
    return _spec(tuple(patterns)).match_file(path.replace("\\", "/").lstrip("/"))


def language_on(settings: Settings, language: str) -> bool:
    """The user's map over the defaults: naming one language leaves the others as they were."""
    languages = {**LANGUAGES, **settings.completion.languages}
    return languages.get(language, languages["*"])


def refusal(settings: Settings, path: str, language: str, invoked: bool) -> str | None:
    """Why the model is not asked here, or None when it may be: suggestions on, for this
    language, asked for (manual mode answers only the trigger key), and not in a file kept out
    of prompts."""
    c = settings.completion
    if not c.enable:
        return "suggestions are off (completion.enable)"
    if not invoked and c.trigger != "automatic":
        return "manual mode answers only the trigger key"
    if not language_on(settings, language):
        return f"suggestions are off for {language} (completion.languages)"
    if excluded(path, settings.context.exclude):
        return "the file is kept out of prompts (context.exclude)"
    return None


def suggestions_allowed(settings: Settings, path: str, language: str, invoked: bool) -> bool:
    return refusal(settings, path, language, invoked) is None
