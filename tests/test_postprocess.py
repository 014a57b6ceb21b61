"""Post-processing rules, each on its own."""

from lsp_server.postprocess import Suggestion, drop_repeated_lines, postprocess, wants_single_line


def test_single_line_mid_line_or_when_multiline_is_off():
    assert postprocess("a + b\nmore", " # note", []).text == "a + b"
    assert postprocess("a + b\nmore", "", [], multiline="never").text == "a + b"
    assert postprocess("a + b\n    more", "", [], "    x = ", multiline="always").text == "a + b\n    more"
    assert wants_single_line("  ", "auto") is False


def test_text_repeating_the_rest_of_the_line_is_dropped():
    assert postprocess("foo(x): pass", ": pass", []).text == "foo(x)"


def test_stops_where_the_code_below_the_cursor_begins():
    below = ["    return total", ""]
    text = "total += x\n    return total\n"
    assert postprocess(text, "", below, "    ").text == "total += x"


def test_looping_lines_are_cut():
    assert drop_repeated_lines(["a = 1", "b = 2", "b = 2", "b = 2"]) == ["a = 1", "b = 2"]
    assert postprocess("x\n    y = 1\n    y = 1\n    y = 1", "", [], "    ").text == "x\n    y = 1"


def test_multiline_stays_in_the_indentation_scope():
    text = "x = 1\n        y = 2\n    z = 3\ndef other():"
    assert postprocess(text, "", [], "        ").text == "x = 1\n        y = 2"


def test_closing_brackets_after_the_cursor_are_replaced_when_retyped():
    assert postprocess("a, b)", ")", []) == Suggestion("a, b)", 1)
    assert postprocess("a, b", "])", []) == Suggestion("a, b", 0)
    assert postprocess("x]) + 1\nnext", "])", []) == Suggestion("x]) + 1", 0)
    assert postprocess("x])", "])  ", []) == Suggestion("x])", 4)


def test_never_whitespace_only():
    assert postprocess("   \n\n", "", []).text == ""
    assert postprocess("  ", "x", []).text == ""


def test_no_markdown_fence_in_a_code_file():
    assert postprocess("```python\nx = 1", "", []).text == ""
    assert postprocess("  ```", "", []).text == ""
    assert postprocess("```python", "", [], markdown=True).text == "```python"
