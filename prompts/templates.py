"""FIM prompt families, found from GGUF metadata and special tokens, never from file names.

A prompt is a tuple of segments: special tokens (by their text) and plain text with a role.
Plain text is tokenized with special-token parsing off, so code that happens to contain
`<|fim_prefix|>` cannot inject control tokens; `fit.py` cuts segments to a token budget.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

# Roles of text segments; fitting drops context first, then cuts the suffix, then the prefix.
PREFIX, SUFFIX, CONTEXT, FIXED = "prefix", "suffix", "context", "fixed"


@dataclass(frozen=True)
class Special:
    """A special (control) token, named by its text in the vocabulary."""

    text: str


@dataclass(frozen=True)
class Text:
    text: str
    role: str = FIXED


Segment = Special | Text


@dataclass(frozen=True)
class ContextFile:
    """Another file shown to the model before the current one (families with file separators)."""

    path: str
    text: str


@dataclass(frozen=True)
class PromptParts:
    segments: tuple[Segment, ...]
    stop: tuple[str, ...]  # stop strings, on decoded text
    family: str

    @property
    def text(self) -> str:
        """The prompt spelled out, special tokens by their text (for tests and logs)."""
        return "".join(s.text for s in self.segments)


@dataclass(frozen=True)
class Family:
    name: str
    fim: bool  # the suffix goes into the prompt
    stop: tuple[str, ...]


FAMILIES: dict[str, Family] = {f.name: f for f in (
    Family("qwen-coder", True, ("<|endoftext|>", "<|file_sep|>", "<|fim_prefix|>", "<|fim_suffix|>",
                                "<|fim_middle|>", "<|repo_name|>", "<|im_end|>", "<|fim_pad|>")),
    Family("codellama", True, ("<EOT>", "</s>")),
    Family("starcoder", True, ("<|endoftext|>", "<file_sep>", "<fim_prefix>", "<fim_suffix>", "<fim_middle>")),
    Family("deepseek-coder", True, ("<｜end▁of▁sentence｜>", "<|EOT|>", "<｜fim▁begin｜>", "<｜fim▁hole｜>")),
    Family("codegemma", True, ("<|file_separator|>", "<|fim_prefix|>", "<|fim_suffix|>", "<|fim_middle|>",
                               "<eos>", "<end_of_turn>")),
    Family("codestral", True, ("</s>", "[PREFIX]", "[SUFFIX]", "[MIDDLE]")),
    Family("smollm", False, ("<file_sep>", "<|endoftext|>", "<repo_name>")),
    Family("prefix-only", False, ()),
)}


def detect_family(has_token: Callable[[str], bool], fim_prefix_text: str | None = None,
                  architecture: str | None = None) -> str:
    """The prompt family of a model.

    `fim_prefix_text` is the text of the FIM-prefix token that the GGUF metadata names
    (tokenizer.ggml.fim_pre_token_id, or what llama.cpp found for it); `has_token` says
    whether a special token exists; `architecture` is general.architecture.
    """
    pre = (fim_prefix_text or "").replace("▁", " ").strip()
    arch = (architecture or "").lower()
    if pre == "<|fim_prefix|>" or (has_token("<|fim_prefix|>") and has_token("<|fim_middle|>")):
        if has_token("<|file_separator|>") or arch.startswith("gemma"):
            return "codegemma"
        return "qwen-coder"
    if pre == "<fim_prefix>" or (has_token("<fim_prefix>") and has_token("<fim_middle>")):
        return "starcoder"
    if pre == "<｜fim▁begin｜>" or has_token("<｜fim▁begin｜>"):
        return "deepseek-coder"
    if pre == "[PREFIX]" or (has_token("[PREFIX]") and has_token("[SUFFIX]")):
        return "codestral"
    if pre == "<PRE>" or (has_token("<PRE>") and has_token("<MID>")):
        return "codellama"
    if has_token("<file_sep>") and has_token("<repo_name>"):
        return "smollm"
    return "prefix-only"


def build_prompt(family: str, prefix: str, suffix: str, path: str,
                 context: Sequence[ContextFile] = (), repo: str = "") -> PromptParts:
    """Prompt segments and stop strings for one completion request (no length limits here)."""
    fam = FAMILIES.get(family, FAMILIES["prefix-only"])
    p, s = Text(prefix, PREFIX), Text(suffix, SUFFIX)
    ctx: list[Segment] = []
    if family == "qwen-coder":
        # Qwen2.5-Coder's repo-level form when there is other context, else plain FIM.
        if context:
            ctx = [Special("<|repo_name|>"), Text(f"{repo or 'repo'}\n")]
            for cf in context:
                ctx += [Special("<|file_sep|>"), Text(f"{cf.path}\n{cf.text}\n", CONTEXT)]
            ctx += [Special("<|file_sep|>"), Text(f"{path}\n")]
        segs = [*ctx, Special("<|fim_prefix|>"), p, Special("<|fim_suffix|>"), s, Special("<|fim_middle|>")]
    elif family == "codellama":
        segs = [Special("<PRE>"), Text(" "), p, Text(" "), Special("<SUF>"), s, Text(" "), Special("<MID>")]
    elif family == "starcoder":
        # StarCoder2's repository form: <repo_name>, then <file_sep>path\ncontent per file.
        if context:
            ctx = [Special("<repo_name>"), Text(repo or "repo")]
            for cf in context:
                ctx += [Special("<file_sep>"), Text(f"{cf.path}\n{cf.text}", CONTEXT)]
            ctx += [Special("<file_sep>")]
        segs = [*ctx, Special("<fim_prefix>"), Text(f"{path}\n"), p, Special("<fim_suffix>"), s,
                Special("<fim_middle>")]
    elif family == "deepseek-coder":
        for cf in context:
            ctx += [Text(f"# {cf.path}\n{cf.text}\n", CONTEXT)]
        segs = [Special("<｜fim▁begin｜>"), *ctx, p, Special("<｜fim▁hole｜>"), s, Special("<｜fim▁end｜>")]
    elif family == "codegemma":
        for cf in context:
            ctx += [Text(f"{cf.path}\n{cf.text}", CONTEXT), Special("<|file_separator|>")]
        segs = [*ctx, Special("<|fim_prefix|>"), p, Special("<|fim_suffix|>"), s, Special("<|fim_middle|>")]
    elif family == "codestral":
        segs = [Special("[SUFFIX]"), s, Special("[PREFIX]"), p]
    elif family == "smollm":
        # SmolLM2 has file separators but no FIM tokens: other files, then this file's head.
        for cf in context:
            ctx += [Special("<file_sep>"), Text(f"{cf.path}\n{cf.text}\n", CONTEXT)]
        segs = [*ctx, Special("<file_sep>"), Text(f"{path}\n"), p]
    else:
        segs = [p]
    return PromptParts(tuple(segs), fam.stop, fam.name)
