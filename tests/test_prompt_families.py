"""FIM families: detected from metadata and special tokens; each builds its exact prompt."""

import pytest

from prompts import FAMILIES, ContextFile, PromptError, build_prompt, detect_family, fit_prompt
from prompts.templates import Special, Text

P, S, PATH = "def add(a, b):\n    ", "\n\nprint(add(1, 2))\n", "src/calc.py"

EXACT = {
    "qwen-coder": f"<|fim_prefix|>{P}<|fim_suffix|>{S}<|fim_middle|>",
    "codellama": f"<PRE> {P} <SUF>{S} <MID>",
    "starcoder": f"<fim_prefix>{PATH}\n{P}<fim_suffix>{S}<fim_middle>",
    "deepseek-coder": f"<｜fim▁begin｜>{P}<｜fim▁hole｜>{S}<｜fim▁end｜>",
    "codegemma": f"<|fim_prefix|>{P}<|fim_suffix|>{S}<|fim_middle|>",
    "codestral": f"[SUFFIX]{S}[PREFIX]{P}",
    "smollm": f"<file_sep>{PATH}\n{P}",
    "prefix-only": P,
}


@pytest.mark.parametrize("family", sorted(EXACT))
def test_each_family_builds_its_exact_prompt(family):
    parts = build_prompt(family, P, S, PATH)
    assert parts.text == EXACT[family]
    assert parts.family == family
    assert parts.stop == FAMILIES[family].stop


def test_qwen_repo_level_form_with_other_files():
    ctx = [ContextFile("src/util.py", "X = 1")]
    parts = build_prompt("qwen-coder", P, S, PATH, context=ctx, repo="calc")
    assert parts.text == ("<|repo_name|>calc\n<|file_sep|>src/util.py\nX = 1\n<|file_sep|>src/calc.py\n"
                          f"<|fim_prefix|>{P}<|fim_suffix|>{S}<|fim_middle|>")


def test_starcoder2_repo_form_and_smollm_file_separators():
    ctx = [ContextFile("a.py", "A = 1")]
    assert build_prompt("starcoder", P, S, PATH, context=ctx, repo="r").text == (
        f"<repo_name>r<file_sep>a.py\nA = 1<file_sep><fim_prefix>{PATH}\n{P}<fim_suffix>{S}<fim_middle>")
    assert build_prompt("smollm", P, S, PATH, context=ctx).text == f"<file_sep>a.py\nA = 1\n<file_sep>{PATH}\n{P}"


def vocab(*tokens):
    return lambda t: t in tokens


@pytest.mark.parametrize(("has", "fim_pre", "arch", "family"), [
    (vocab("<|fim_prefix|>", "<|fim_middle|>", "<|repo_name|>", "<|file_sep|>"), "<|fim_prefix|>", "qwen2",
     "qwen-coder"),
    (vocab("<|fim_prefix|>", "<|fim_middle|>", "<|file_separator|>"), "<|fim_prefix|>", "gemma", "codegemma"),
    (vocab(), "<|fim_prefix|>", "gemma2", "codegemma"),  # metadata alone is enough
    (vocab("<fim_prefix>", "<fim_middle>", "<file_sep>", "<repo_name>"), None, "starcoder2", "starcoder"),
    (vocab("<｜fim▁begin｜>", "<｜fim▁hole｜>"), None, "llama", "deepseek-coder"),
    (vocab("[PREFIX]", "[SUFFIX]", "[MIDDLE]"), None, "llama", "codestral"),
    (vocab(), "▁<PRE>", "llama", "codellama"),  # CodeLlama spells it with the SPM space mark
    (vocab("<file_sep>", "<repo_name>"), None, "llama", "smollm"),
    (vocab(), None, "gemma3", "prefix-only"),
])
def test_family_detected_from_tokens_and_metadata(has, fim_pre, arch, family):
    assert detect_family(has, fim_pre, arch) == family


def test_detection_ignores_file_names():
    # A model file named like a coder model but without FIM tokens is prefix-only.
    assert detect_family(vocab(), None, "qwen2") == "prefix-only"


def chars(text):
    return [ord(c) for c in text]


def special(text):
    return {"<a>": 1000, "<b>": 1001}.get(text)


def test_fit_keeps_everything_within_budget():
    parts = build_prompt("prefix-only", "abc", "", "x")
    assert fit_prompt(parts, chars, special, 10) == chars("abc")


def test_fit_drops_context_first_then_cuts_suffix_then_prefix_from_the_left():
    from prompts.templates import PromptParts

    parts = PromptParts((Text("CTX" * 10, "context"), Special("<a>"), Text("prefix-text", "prefix"),
                         Special("<b>"), Text("suffix-text", "suffix")), (), "t")
    ids = fit_prompt(parts, chars, special, 24, suffix_share=0.25)
    assert len(ids) == 24
    assert ids[0] == 1000  # the context went first
    out = "".join(chr(i) if i < 1000 else "|" for i in ids)
    assert out == "|prefix-text|suffix-text"
    ids = fit_prompt(parts, chars, special, 12, suffix_share=0.25)
    out = "".join(chr(i) if i < 1000 else "|" for i in ids)
    assert out == "|ix-text|suf"  # suffix down to a quarter, its start kept; prefix keeps its end


def test_fit_errors_on_missing_special_token_and_empty_prompt():
    with pytest.raises(PromptError, match="no special token '<fim_prefix>'"):
        fit_prompt(build_prompt("starcoder", "a", "b", "p"), chars, special, 100)
    with pytest.raises(PromptError, match="empty prompt"):
        fit_prompt(build_prompt("prefix-only", "", "", "p"), chars, special, 100)
    with pytest.raises(PromptError, match="no room"):
        fit_prompt(build_prompt("prefix-only", "a", "", "p"), chars, special, 0)


def test_prefix_window_start_stays_put_while_typing():
    from prompts.excerpt import prefix_excerpt, suffix_excerpt

    text = "".join(f"line {i} = {i}\n" for i in range(2000))
    first = prefix_excerpt(text, 6000, 2048)
    assert len(first) <= 6000 and text.endswith(first) and (text[: -len(first)]).endswith("\n")
    typed = text
    for ch in "value = compute(x)\n    more":
        typed += ch
        w = prefix_excerpt(typed, 6000, 2048)
        assert typed.index(w) == text.index(first)  # same start: the prompt's KV cache is reused
    assert prefix_excerpt("short", 6000) == "short"
    assert suffix_excerpt("a\n" * 5000, 2000).endswith("\n") and len(suffix_excerpt("a\n" * 5000, 2000)) <= 2000
