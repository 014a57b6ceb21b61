"""Completions from a serving engine: llama.cpp's llama-server or an OpenAI-style server.

The same pipeline (context, cache, post-processing, stats) runs in front; only generation
moves. `llama-server` gets `/infill` with prefix, suffix and the context files as
`input_extra`, so the server spells the prompt in its model's FIM form and reuses its KV
cache (`cache_prompt`); its own speculation (set where it starts: -md, --spec-type) replaces
specfill's. A model without FIM tokens makes llama-server refuse /infill; specfill
then sends `/completion` with a prompt it spells itself (`model.remote.template`), as it
does for `openai` engines (`/v1/completions`). Tokens stream back as server-sent events;
a cancel or the time budget closes the stream, which stops the server's generation.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Sequence

from lsp_server.http_stream import Cancelled, DeadlineReached, Endpoint, HttpError, Limits, request
from lsp_server.settings import RemoteSettings
from prompts import ContextFile, build_prompt
from speculative.decode import GenerationResult


class RemoteError(Exception):
    """A remote request that failed; the message is for the editor."""


def _stop_at(text: str, stop: Sequence[str]) -> tuple[str, bool]:
    """Text cut before the first stop string (servers may cap how many stops they honour)."""
    cuts = [i for i in (text.find(s) for s in stop if s) if i >= 0]
    return (text[: min(cuts)], True) if cuts else (text, False)


class RemoteEngine:
    def __init__(self, cfg: RemoteSettings) -> None:
        try:
            self.endpoint = Endpoint.parse(cfg.url)
        except HttpError as exc:
            raise RemoteError(str(exc)) from None
        self.cfg = cfg
        self.limits = Limits(connect_s=cfg.connect_timeout_ms / 1000, read_s=cfg.read_timeout_ms / 1000)
        self.headers = {"Authorization": f"Bearer {cfg.api_key}"} if cfg.api_key else {}
        self.infill = cfg.kind == "llama-server"  # until the server says its model cannot
        self.requests = 0

    def describe(self) -> str:
        return f"{self.cfg.kind} at {self.endpoint}"

    def probe(self) -> str:
        """Ask the engine whether it is up (`/health` or `/v1/models`); what it said."""
        path = "/health" if self.cfg.kind == "llama-server" else "/v1/models"
        try:
            with request("GET", self.endpoint, path, None, self.limits, headers=self.headers) as resp:
                return b"".join(resp.chunks).decode("utf-8", "replace")[:200]
        except (HttpError, Cancelled) as exc:
            raise RemoteError(str(exc)) from None

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
        except HttpError as exc:
            if self.infill and "not supported" in str(exc).lower():
                self.infill = False  # the model has no FIM tokens: spell the prompt ourselves from now on
                return self.generate(prefix, suffix, path, context, max_tokens=max_tokens, stop=stop,
                                     budget_s=budget_s - (time.monotonic() - t0), cancel=cancel,
                                     on_text=on_text)
            raise RemoteError(str(exc)) from None

    def _generate(self, prefix, suffix, path, context, max_tokens, stop, budget_s, cancel, on_text,
                  t0) -> GenerationResult:
        self.requests += 1
        endpoint, body = self._body(prefix, suffix, path, context, max_tokens, stop, int(budget_s * 1000))
        text, events, ttft, reason = "", 0, None, "max_tokens"
        n_prompt = n_reused = 0
        try:
            with request("POST", self.endpoint, endpoint, body, self.limits, cancel, self.headers) as resp:
                for data in resp.events():
                    if data == "[DONE]":
                        break
                    try:
                        event = json.loads(data)
                    except ValueError:
                        raise HttpError(f"{self.endpoint}{endpoint}: not JSON: {data[:80]!r}") from None
                    piece, done, why = self._piece(event)
                    events += 1
                    if piece:
                        if ttft is None:  # as locally, the budget ends decoding, never the prompt's reading
                            ttft = (time.monotonic() - t0) * 1000
                            resp.close_at(t0 + budget_s)
                        text, stopped = _stop_at(text + piece, stop)
                        if on_text is not None:
                            on_text(text)
                        if stopped:
                            reason = "stop"
                            break
                    if "timings" in event:  # llama-server: prompt size and the part its cache reused
                        n_prompt = event["timings"].get("prompt_n", 0) + event["timings"].get("cache_n", 0)
                        n_reused = event["timings"].get("cache_n", 0)
                    if done:
                        reason = why or reason
                        break
                else:
                    if resp.headers.get("content-type", "").startswith("text/event-stream") and events == 0:
                        raise HttpError(f"{self.endpoint}{endpoint}: the stream ended before any event")
        except Cancelled:
            reason = "cancelled"
        except DeadlineReached:
            reason = "budget"
        total = (time.monotonic() - t0) * 1000
        return GenerationResult(text=text, tokens=[], stop_reason=reason, n_prompt=n_prompt, n_reused=n_reused,
                                ttft_ms=ttft if ttft is not None else total, total_ms=total, decode_steps=events)

    @staticmethod
    def _piece(event: dict) -> tuple[str, bool, str | None]:
        """(new text, last event?, stop reason) of one streamed event of either kind."""
        if "choices" in event:  # openai
            choice = (event.get("choices") or [{}])[0]
            finish = choice.get("finish_reason")
            return choice.get("text") or "", finish is not None, {"length": "max_tokens"}.get(finish, "stop")
        if "error" in event:
            err = event["error"]
            raise HttpError(err.get("message", str(err)) if isinstance(err, dict) else str(err))
        done = bool(event.get("stop"))
        why = None
        if done:
            why = "max_tokens" if event.get("stop_type") == "limit" else "stop"
        return event.get("content") or "", done, why
