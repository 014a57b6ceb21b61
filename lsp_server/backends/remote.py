"""Completions from a serving engine: llama.cpp's llama-server or an OpenAI-style server.

The same pipeline (context, cache, post-processing, stats) runs in front; only generation
moves. `llama-server` gets `/infill` with prefix, suffix and the context files as
`input_extra`, so the server spells the prompt in its model's FIM form and reuses its KV
cache (`cache_prompt`); its own speculation (set where it starts: -md, --spec-type) replaces
specfill's. A model without FIM tokens makes llama-server refuse /infill; specfill
then sends `/completion` with a prompt it spells itself (`model.remote.template`), as it
does for `openai` engines (`/v1/completions`). Nothing is token-healed remotely: neither
engine can constrain the first tokens (docs/performance.md).

HTTP is httpx's Client on the model thread: connections are pooled and reused from keystroke
to keystroke, connects (only) are retried. A watcher thread shuts the stream's socket the
moment the request's cancel flag is set or the time budget runs out: the read returns at
once, and the engine sees the connection close, which is how it learns to stop generating.
(httpx's AsyncClient on a loop of its own was slower to answer and to notice a cancel:
docs/remote.md.)
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import ssl
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import httpx

from lsp_server.backends.backend import Completion, Request
from lsp_server.postprocess import wants_single_line
from lsp_server.settings import RemoteSettings, Settings
from prompts import FAMILIES, ContextFile, build_prompt
from prompts.excerpt import other_files_excerpt, prefix_excerpt, suffix_excerpt
from speculative.decode import GenerationResult
from speculative.output import cut_at_stop

POLL_S = 0.005  # how often the watcher looks at the time budget (a cancel wakes it at once)
CONNECT_RETRIES = 2  # further attempts after a refused or timed-out connect; a sent request is never retried
MAX_ERROR_BODY = 64 * 1024


class RemoteError(Exception):
    """A remote request that failed; the message is for the editor."""


@dataclass
class _Stream:
    """What one streamed request produced so far."""

    text: str = ""
    events: int = 0
    ttft_ms: float | None = None
    reason: str = "max_tokens"
    n_prompt: int = 0
    n_reused: int = 0
    response: httpx.Response | None = None


def _base_url(url: str) -> httpx.URL:
    try:
        parsed = httpx.URL(url.strip())
    except httpx.InvalidURL as exc:
        raise RemoteError(f"remote url {url!r}: {exc}") from None
    if parsed.scheme not in ("http", "https") or not parsed.host:
        raise RemoteError(f"remote url {url!r}: expected http://host:port or https://host:port")
    return parsed


class RemoteClient:
    def __init__(self, cfg: RemoteSettings) -> None:
        self.url = _base_url(cfg.url)
        self.cfg = cfg
        self.read_s = cfg.read_timeout_ms / 1000
        self.infill = cfg.kind == "llama-server"  # until the server says its model cannot
        self.requests = 0
        self.connections = 0  # TCP connections opened: fewer than requests when kept alive
        headers = {"Accept": "text/event-stream, application/json"}
        if cfg.api_key:
            headers["Authorization"] = f"Bearer {cfg.api_key}"
        timeout = httpx.Timeout(self.read_s, connect=cfg.connect_timeout_ms / 1000)
        self._client = httpx.Client(transport=httpx.HTTPTransport(retries=CONNECT_RETRIES), timeout=timeout,
                                    headers=headers, event_hooks={"request": [self._trace_connections]})

    @property
    def endpoint(self) -> str:
        return str(self.url)

    def _trace_connections(self, request: httpx.Request) -> None:
        def trace(event: str, info: dict) -> None:
            if event == "connection.connect_tcp.complete":
                self.connections += 1

        request.extensions["trace"] = trace

    def close(self) -> None:
        self._client.close()

    def describe(self) -> str:
        return f"{self.cfg.kind} at {self.url}"

    def probe(self) -> str:
        """Ask the engine whether it is up (`/health` or `/v1/models`); what it said."""
        path = "/health" if self.cfg.kind == "llama-server" else "/v1/models"

        try:
            with self._client.stream("GET", self._at(path)) as resp:
                self._raise_for_status(resp, path)
                return resp.read().decode("utf-8", "replace")[:200]
        except httpx.HTTPError as exc:
            raise _error(self.url, self.read_s, exc) from None

    def _at(self, path: str) -> httpx.URL:
        return self.url.copy_with(path=self.url.path.rstrip("/") + path)

    def _raise_for_status(self, resp: httpx.Response, path: str) -> None:
        """A status other than 2xx: RemoteError with the engine's own message."""
        if resp.is_success:
            return
        body = b""
        for part in resp.iter_bytes():
            body += part
            if len(body) > MAX_ERROR_BODY:
                break
        message = body.decode("utf-8", "replace").strip()
        try:
            data = json.loads(message)
            err = data.get("error", data.get("detail", data)) if isinstance(data, dict) else data
            message = err.get("message", json.dumps(err)) if isinstance(err, dict) else str(err)
        except ValueError:
            pass
        raise RemoteError(f"{self.url}{path}: {resp.status_code} {resp.reason_phrase}"
                          + (f": {message[:300]}" if message else ""))

    def _body(self, prefix: str, suffix: str, path: str, context: Sequence[ContextFile], max_tokens: int,
              stop: Sequence[str], budget_ms: int) -> tuple[str, dict]:
        common = {"stream": True, "temperature": 0.0, "stop": list(stop)}
        if self.cfg.kind == "openai":
            body = {**common, "prompt": build_prompt(self.cfg.template, prefix, suffix, path, context).text,
                    "max_tokens": max_tokens}
            return "/v1/completions", {**body, "model": self.cfg.model} if self.cfg.model else body
        # llama-server stops on time too; its speculation is set where it starts (-md, --spec-type).
        native = {**common, "n_predict": max_tokens, "cache_prompt": True, "t_max_predict_ms": budget_ms}
        if self.infill:
            extra = [{"filename": c.path, "text": c.text} for c in context]
            return "/infill", {**native, "input_prefix": prefix, "input_suffix": suffix, "input_extra": extra}
        return "/completion", {**native, "prompt": build_prompt(self.cfg.template, prefix, suffix, path,
                                                                context).text}

    def generate(self, prefix: str, suffix: str, path: str, context: Sequence[ContextFile], *, max_tokens: int,
                 stop: Sequence[str], budget_s: float, cancel: threading.Event,
                 on_text: Callable[[str], None] | None = None) -> GenerationResult:
        t0 = time.monotonic()
        try:
            return self._generate(prefix, suffix, path, context, max_tokens, stop, budget_s, cancel, on_text, t0)
        except RemoteError as exc:
            if self.infill and "not supported" in str(exc).lower():
                self.infill = False  # the model has no FIM tokens: spell the prompt ourselves from now on
                return self.generate(prefix, suffix, path, context, max_tokens=max_tokens, stop=stop,
                                     budget_s=budget_s - (time.monotonic() - t0), cancel=cancel,
                                     on_text=on_text)
            raise

    def _generate(self, prefix, suffix, path, context, max_tokens, stop, budget_s, cancel, on_text,
                  t0) -> GenerationResult:
        self.requests += 1
        endpoint, body = self._body(prefix, suffix, path, context, max_tokens, stop, int(budget_s * 1000))
        out = _Stream()
        for attempt in (1, 2):
            opened = self.connections
            try:
                self._stream(endpoint, body, stop, out, cancel, on_text, t0, budget_s)
                break
            except httpx.RemoteProtocolError as exc:
                # A kept-alive connection the engine had closed (llama-server does after an error
                # answer) fails before any response: the engine never saw the request, so it is
                # sent again, once, on a new connection. Anything else is not retried.
                if attempt == 2 or self.connections != opened or out.events:
                    raise _error(self.url, self.read_s, exc) from None
            except httpx.HTTPError as exc:
                raise _error(self.url, self.read_s, exc) from None
        total = (time.monotonic() - t0) * 1000
        return GenerationResult(text=out.text, tokens=[], stop_reason=out.reason, n_prompt=out.n_prompt,
                                n_reused=out.n_reused, ttft_ms=out.ttft_ms if out.ttft_ms is not None else total,
                                total_ms=total, decode_steps=out.events)

    def _stream(self, endpoint: str, body: dict, stop: Sequence[str], out: _Stream, cancel: threading.Event,
                on_text, t0: float, budget_s: float) -> None:
        """Read the stream while a watcher shuts it on the cancel flag, or once the budget is
        spent after the first token: the budget ends decoding, never the reading of the prompt
        (as locally)."""
        finished = threading.Event()

        def watch() -> None:
            while not finished.is_set():
                over_budget = out.ttft_ms is not None and time.monotonic() - t0 > budget_s
                if cancel.wait(POLL_S) or over_budget:
                    if not finished.is_set():
                        out.reason = "cancelled" if cancel.is_set() else "budget"
                        _shut(out.response)
                    return

        watcher = threading.Thread(target=watch, name="specfill-remote-watch", daemon=True)
        watcher.start()
        try:
            self._read(endpoint, body, stop, out, on_text, t0)
        except httpx.HTTPError:
            if out.reason not in ("cancelled", "budget"):
                raise  # else: the watcher shut the stream, as it should
        finally:
            finished.set()  # the watcher ends at its next look (not joined: that would cost a poll)

    def _read(self, endpoint: str, body: dict, stop: Sequence[str], out: _Stream, on_text, t0: float) -> None:
        with self._client.stream("POST", self._at(endpoint), json=body) as resp:
            out.response = resp
            if out.reason in ("cancelled", "budget"):  # cancelled while connecting
                _shut(resp)
                return
            self._raise_for_status(resp, endpoint)
            sse = resp.headers.get("content-type", "").startswith("text/event-stream")
            lines = resp.iter_lines() if sse else iter([resp.read().decode("utf-8", "replace")])
            for line in lines:
                if not line.startswith("data:") and sse:
                    continue
                data = line[5:].strip() if sse else line
                if data == "[DONE]":
                    break
                try:
                    event = json.loads(data)
                except ValueError:
                    raise RemoteError(f"{self.url}{endpoint}: not JSON: {data[:80]!r}") from None
                piece, done, why = self._piece(event)
                out.events += 1
                if piece:
                    if out.ttft_ms is None:
                        out.ttft_ms = (time.monotonic() - t0) * 1000
                    out.text, stopped = cut_at_stop(out.text + piece, stop)
                    if on_text is not None:
                        on_text(out.text)
                    if stopped:
                        out.reason = "stop"
                        return
                if "timings" in event:  # llama-server: prompt size and the part its cache reused
                    out.n_prompt = event["timings"].get("prompt_n", 0) + event["timings"].get("cache_n", 0)
                    out.n_reused = event["timings"].get("cache_n", 0)
                if done:
                    out.reason = why or out.reason
                    break
            else:
                if sse and out.events == 0:
                    raise RemoteError(f"{self.url}{endpoint}: the stream ended before any event")
            for _ in lines:  # the engine is done: read the stream's end, so the connection is reused
                pass

    @staticmethod
    def _piece(event: dict) -> tuple[str, bool, str | None]:
        """(new text, last event?, stop reason) of one streamed event of either kind."""
        if "choices" in event:  # openai
            choice = (event.get("choices") or [{}])[0]
            finish = choice.get("finish_reason")
            return choice.get("text") or "", finish is not None, {"length": "max_tokens"}.get(finish, "stop")
        if "error" in event:
            err = event["error"]
            raise RemoteError(err.get("message", str(err)) if isinstance(err, dict) else str(err))
        done = bool(event.get("stop"))
        why = None
        if done:
            why = "max_tokens" if event.get("stop_type") == "limit" else "stop"
        return event.get("content") or "", done, why


def _error(url: httpx.URL, read_s: float, exc: httpx.HTTPError) -> RemoteError:
    """An httpx error in words that say where, what and after how long."""
    if isinstance(exc, httpx.ConnectTimeout):
        return RemoteError(f"cannot connect to {url}: timed out ({CONNECT_RETRIES + 1} attempts)")
    if isinstance(exc, httpx.ConnectError):
        cause = _root_cause(exc)
        if isinstance(cause, ssl.SSLError):
            return RemoteError(f"TLS with {url} failed: {cause}")
        if isinstance(cause, socket.gaierror):  # a wrong host name: retrying does not help
            return RemoteError(f"cannot resolve {url.host}: {cause.strerror or cause}")
        errno = getattr(cause, "errno", None)
        why = os.strerror(errno) if errno else str(cause) or type(cause).__name__
        return RemoteError(f"cannot connect to {url}: {why} ({CONNECT_RETRIES + 1} attempts)")
    if isinstance(exc, httpx.ReadTimeout):
        return RemoteError(f"no answer from {url} in {read_s:g} s")
    if isinstance(exc, httpx.RemoteProtocolError | httpx.ReadError | httpx.WriteError):
        return RemoteError(f"{url} closed the connection: {exc or type(exc).__name__}")
    return RemoteError(f"{url}: {exc or type(exc).__name__}")


def _shut(response: httpx.Response | None) -> None:
    """End the stream's TCP connection now: the engine sees it closed and stops generating,
    and the blocked read on the model thread returns."""
    stream = response.extensions.get("network_stream") if response is not None else None
    sock = stream.get_extra_info("socket") if stream is not None else None
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)


def _root_cause(exc: BaseException) -> BaseException:
    """The innermost exception under httpx's wrappers (an OSError, a gaierror, an SSLError)."""
    while (inner := exc.__cause__ or exc.__context__) is not None and inner is not exc:
        exc = inner
    return exc


class RemoteBackend:
    """A `Backend` on a serving engine: the same context, sent as text."""

    reads_ahead = False  # the engine reads its own prompts; after-accept work would cost it a request

    def __init__(self, settings: Settings) -> None:
        self.remote = RemoteClient(settings.model.remote)
        self.family = f"remote {settings.model.remote.kind}"
        self.describe = self.remote.describe()

    def complete(self, req: Request) -> Completion | None:
        if req.cancel.is_set():
            return None
        s = req.settings
        c = s.context
        prefix, suffix = prefix_excerpt(req.prefix, c.prefix_chars), suffix_excerpt(req.suffix, c.suffix_chars)
        single = wants_single_line(suffix.split("\n", 1)[0], s.completion.multiline)
        stop = FAMILIES[s.model.remote.template].stop + (("\n",) if single else ())
        context = other_files_excerpt(req.others, c.other_files_chars)
        return Completion.of(self.remote.generate(
            prefix, suffix, req.path, context, max_tokens=s.completion.max_tokens, stop=stop,
            budget_s=s.completion.budget_ms / 1000, cancel=req.cancel, on_text=req.on_text))

    def cancel_background(self) -> None:
        """Nothing runs in the background: a request's own cancel shuts its stream."""

    def stats(self) -> dict:
        r = self.remote
        return {"remote": {"url": r.endpoint, "kind": r.cfg.kind, "infill": r.infill, "requests": r.requests,
                           "connections": r.connections}}

    def close(self) -> None:
        self.remote.close()
