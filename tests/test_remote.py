"""Remote engines against real servers on loopback: llama-cpp-python's OpenAI server
(`python -m llama_cpp.server`) and llama.cpp's llama-server, with the embedded model; one
killed mid-stream, one that never answers, one that answers 500, one that comes up late."""

import threading
import time

import pytest
from decode_helpers import decode
from remote_helpers import Failing, Silent, llama_server, openai_engine
from same_output import assert_same_greedy_text

from lsp_server.backends.remote import RemoteClient, RemoteError
from lsp_server.settings import RemoteSettings
from prompts import ContextFile, build_prompt

pytestmark = pytest.mark.remote

PREFIX = "def fibonacci(n):\n    "
LONG_PREFIX = "# A long list of numbers, one a line\n1\n2\n3\n"  # generates until max_tokens


def remote(url: str, kind: str = "openai", **kw) -> RemoteClient:
    return RemoteClient(RemoteSettings(url=url, kind=kind, **kw))


def generate(r: RemoteClient, prefix=PREFIX, max_tokens=24, cancel=None, on_text=None, budget_s=60.0, stop=()):
    return r.generate(prefix, "", "fib.py", [], max_tokens=max_tokens, stop=stop, budget_s=budget_s,
                      cancel=cancel or threading.Event(), on_text=on_text)


def same_as_local(engine, text: str, what: str, prefix=PREFIX, max_tokens=24) -> None:
    """The remote's greedy text is the same model's local greedy text, up to near-ties (another
    process, another path: docs/testing.md)."""
    prompt = engine.tokenize(build_prompt("prefix-only", prefix, "", "fib.py").text)
    reference = decode(engine, prompt, max_tokens=max_tokens, trace=True)
    assert_same_greedy_text(reference, engine.token_bytes, text.encode(), what)


@pytest.fixture(scope="module")
def openai(model_path, tmp_path_factory):
    engine = openai_engine(model_path, tmp_path_factory.mktemp("engine"))
    yield engine
    engine.kill()


def test_openai_streams_the_greedy_completion(openai, engine):
    r = remote(openai.url)
    assert "data" in r.probe()
    seen: list[str] = []
    streamed = generate(r, on_text=seen.append)
    assert streamed.text and len(seen) > 1, "tokens arrive as they are generated"
    assert all(b.startswith(a) for a, b in zip(seen, seen[1:], strict=False))
    assert streamed.ttft_ms < streamed.total_ms
    same_as_local(engine, streamed.text, "streamed")
    same_as_local(engine, generate(r).text, "again, from the server's cache")


def test_stop_strings_cut_the_text(openai):
    r = remote(openai.url)
    full = generate(r, prefix=LONG_PREFIX, max_tokens=12).text
    assert "\n" in full
    cut = generate(r, prefix=LONG_PREFIX, max_tokens=12, stop=["\n"])
    assert cut.text == full.split("\n")[0] and cut.stop_reason == "stop"


def test_cancel_closes_the_stream_and_frees_the_engine(openai):
    """The server serves one request at a time: had the cancelled 1,500-token generation
    gone on (about a minute here), the next request would wait for it."""
    r = remote(openai.url)
    cancel = threading.Event()
    t0 = time.monotonic()
    result = generate(r, prefix=LONG_PREFIX, max_tokens=1500, cancel=cancel,
                      on_text=lambda text: len(text) > 8 and cancel.set())
    assert result.stop_reason == "cancelled" and len(result.text) > 8
    assert time.monotonic() - t0 < 20
    t1 = time.monotonic()
    assert generate(r, max_tokens=8).text
    assert time.monotonic() - t1 < 15, "the engine was still generating for the closed stream"


def test_budget_ends_a_slow_generation_with_its_text(openai):
    result = generate(remote(openai.url), prefix=LONG_PREFIX, max_tokens=1500, budget_s=1.5)
    assert result.stop_reason == "budget" and result.text and result.total_ms < 4000


def test_engine_killed_mid_stream(model_path, tmp_path):
    engine = openai_engine(model_path, tmp_path)
    r = remote(engine.url)
    try:
        with pytest.raises(RemoteError, match="closed the connection"):
            generate(r, prefix=LONG_PREFIX, max_tokens=1500, on_text=lambda text: len(text) > 8 and engine.kill())
    finally:
        engine.kill()
    t0 = time.monotonic()
    with pytest.raises(RemoteError, match=r"cannot connect .*\(3 attempts\)"):
        generate(r)
    assert time.monotonic() - t0 >= 0.3, "two retries with 0.1 s and 0.2 s backoff"


def test_engine_that_never_answers_times_out():
    silent = Silent()
    try:
        r = remote(silent.url, read_timeout_ms=400)
        t0 = time.monotonic()
        with pytest.raises(RemoteError, match=r"no answer from .* in 0.4 s"):
            generate(r)
        assert 0.35 < time.monotonic() - t0 < 5
        assert len(silent.accepted) == 1, "a request that was sent is never retried"
    finally:
        silent.close()


def test_engine_answering_500_gives_its_message_once():
    failing = Failing(500, "out of memory in slot 0")
    try:
        with pytest.raises(RemoteError, match="500 Internal Server Error: out of memory in slot 0"):
            generate(remote(failing.url))
        assert failing.requests == 1, "only connect errors are retried"
    finally:
        failing.close()


def test_connect_is_retried_until_the_engine_comes_up():
    """Nothing listens for the first attempt; the retry after backoff reaches the engine
    (here one that answers 500, to tell the two apart)."""
    late = Failing(500, "late but here", delay_s=0.15)
    try:
        with pytest.raises(RemoteError, match="late but here"):
            generate(remote(late.url))
        assert late.requests == 1
    finally:
        late.close()


def test_bad_urls_are_named():
    with pytest.raises(RemoteError, match="expected http://host:port"):
        remote("localhost:8080")
    with pytest.raises(RemoteError, match="cannot resolve"):
        generate(remote("http://no-such-host.invalid:80", connect_timeout_ms=200))


def test_llama_server_without_fim_tokens_falls_back_to_completion(model_path, tmp_path, engine):
    """SmolLM2 has no FIM tokens, so llama-server refuses /infill; specfill then spells the
    prompt itself and streams /completion. Its one slot is free again once a stream closes."""
    served = llama_server(model_path, tmp_path)
    try:
        r = remote(served.url, kind="llama-server")
        assert "ok" in r.probe()
        seen: list[str] = []
        result = generate(r, on_text=seen.append)
        assert result.text and len(seen) > 1 and not r.infill
        assert result.n_prompt > 0
        again = generate(r)
        assert again.n_reused > 0, "cache_prompt reuses the prompt's KV"
        same_as_local(engine, result.text, "llama-server")
        same_as_local(engine, again.text, "llama-server from its cache")
        cancel = threading.Event()
        t0 = time.monotonic()
        out = generate(r, prefix=LONG_PREFIX, max_tokens=1500, cancel=cancel,
                       on_text=lambda text: len(text) > 8 and cancel.set())
        assert out.stop_reason == "cancelled" and time.monotonic() - t0 < 20
        t1 = time.monotonic()
        assert generate(r, max_tokens=8).text
        assert time.monotonic() - t1 < 10, "the slot was still generating for the closed stream"
    finally:
        served.kill()


def test_llama_server_infill_with_fim_tokens(model_path, tmp_path):
    """The same model, told by GGUF overrides that three of its special tokens are FIM
    tokens: llama-server then takes /infill, with the context files as input_extra."""
    fim = ["--override-kv", "tokenizer.ggml.fim_pre_token_id=int:4", "--override-kv",
           "tokenizer.ggml.fim_suf_token_id=int:5", "--override-kv", "tokenizer.ggml.fim_mid_token_id=int:6",
           "-b", "512"]  # extra context gets what n_ctx leaves beyond one batch and the answer
    engine = llama_server(model_path, tmp_path, fim)
    try:
        r = remote(engine.url, kind="llama-server")
        alone = r.generate(PREFIX, "\n\nprint(fibonacci(10))\n", "fib.py", [], max_tokens=16, stop=(),
                           budget_s=60, cancel=threading.Event())
        assert r.infill and alone.stop_reason in ("max_tokens", "stop") and alone.n_prompt > 0
        other = ContextFile("util.py", "def lucas(n):\n    return 2 if n == 0 else 1\n")
        with_context = r.generate(PREFIX, "\n\nprint(fibonacci(10))\n", "fib.py", [other], max_tokens=16,
                                  stop=(), budget_s=60, cancel=threading.Event())
        assert r.infill and with_context.n_prompt > alone.n_prompt + 10, "input_extra reached the prompt"
    finally:
        engine.kill()


def test_tls_to_a_plain_http_engine_is_named():
    plain = Failing(500, "plain http")
    try:
        with pytest.raises(RemoteError, match="TLS with https://127.0.0.1"):
            generate(remote(plain.url.replace("http://", "https://")))
    finally:
        plain.close()


def test_connections_are_pooled_across_requests(openai):
    """Keystroke after keystroke over one kept-alive connection; a cancelled stream is closed
    (the engine must stop), so the next request opens a new one."""
    r = remote(openai.url)
    for _ in range(5):
        assert generate(r, max_tokens=4).text
    assert r.requests == 5 and r.connections == 1
    cancel = threading.Event()
    generate(r, prefix=LONG_PREFIX, max_tokens=1500, cancel=cancel, on_text=lambda text: len(text) > 8 and cancel.set())
    assert generate(r, max_tokens=4).text and r.connections == 2
    r.close()
