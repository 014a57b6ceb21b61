"""Type-through cache and the early-answer line split."""

import asyncio
import threading

from lsp_server.session.cache import TypeThroughCache
from lsp_server.session.pipeline import Inflight, first_complete_line


def test_typing_what_was_suggested_is_answered_from_the_cache():
    c = TypeThroughCache()
    c.put("u", "def f(", ")\n", "a, b):\n    return a")
    assert c.lookup("u", "def f(", ")\n") == "a, b):\n    return a"
    assert c.lookup("u", "def f(a, ", ")\n") == "b):\n    return a"
    assert c.lookup("u", "def f(a, x", ")\n") is None  # typed something else
    assert c.lookup("u", "def f(a, ", "\n") is None  # the text after the cursor changed
    assert c.lookup("u", "def f(a, b):\n    return a", ")\n") is None  # nothing left
    assert c.lookup("other", "def f(", ")\n") is None


def test_cache_is_bounded():
    c = TypeThroughCache(max_docs=2)
    for uri in "abc":
        c.put(uri, "p", "", "text")
    assert c.lookup("a", "p", "") is None and c.lookup("c", "p", "") == "text"


def test_first_complete_line():
    assert first_complete_line("foo(x)") is None
    assert first_complete_line("foo(x)\nbar") == "foo(x)"
    assert first_complete_line("\n    x = 1\n  y") == "\n    x = 1"
    assert first_complete_line("\n\n") is None


def test_a_keystroke_joins_a_generation_in_flight_only_when_its_text_agrees():
    async def check():
        flight = Inflight("x = T", "\n", threading.Event(), asyncio.get_running_loop().create_future())
        assert flight.agrees_with("x = T", "\n")  # the same place asked again
        # Nothing generated yet: it may well end empty, and a new generation would answer "Th".
        assert not flight.agrees_with("x = Th", "\n")
        flight.text = "ree"
        assert not flight.agrees_with("x = Th", "\n")  # typed something else
        flight.text = "hese"
        assert flight.agrees_with("x = Th", "\n") and flight.agrees_with("x = These a", "\n")
        assert not flight.agrees_with("x = Th", "")  # the text after the cursor changed
        flight.future.set_result(None)
        assert not flight.agrees_with("x = Th", "\n")  # over: its answer is in the cache
    asyncio.run(check())


def test_a_line_the_model_ended_is_not_extended_before_it_is_typed_whole():
    c = TypeThroughCache()
    entry = c.put("u", "x = ", "", "foo(1) + bar", done=True)
    entry.until = len("foo(1)")  # the model ended its line there; what follows came after
    assert c.lookup("u", "x = ", "") == "foo(1)"
    assert c.lookup("u", "x = fo", "") == "o(1)"
    assert c.lookup("u", "x = foo(1)", "") == " + bar"
