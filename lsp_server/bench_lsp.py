"""`specfill bench-lsp`: the real server over stdio, typing each case's middle at a pace.

Per case: open the file (prefix + suffix) and make one untimed request, as an editor does
when the cursor lands (the cold prefill); then type the middle one character at a time,
each keystroke a didChange and an inlineCompletion request. Every request is awaited (the
server itself supersedes stale ones), so latency is not capped by the pace. `useful` is the
fraction of keystrokes whose suggestion arrived before the next one and continues the true
middle.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from pathlib import Path

from lsprotocol import types
from pygls.lsp.client import LanguageClient

from lsp_server.positions import utf16_position
from speculative.percentile import pct
from speculative.workload import load_workload


def continues(suggestion: str, rest: str) -> bool:
    """The suggestion is what the user goes on to type (as far as either goes, on this line)."""
    first = suggestion.split("\n", 1)[0]
    rest = rest.split("\n", 1)[0]
    return bool(first.strip()) and (rest.startswith(first) or first.startswith(rest))


async def _run(cases: list[dict], key_ms: float, settings: dict) -> dict:
    client = LanguageClient("specfill-bench-lsp", "0.1")
    await client.start_io(sys.executable, "-m", "lsp_server", "serve")
    await client.initialize_async(types.InitializeParams(capabilities=types.ClientCapabilities(),
                                                         initialization_options={"specfill": settings}))
    client.initialized(types.InitializedParams())
    while (await client.protocol.send_request_async("specfill/stats", {})).state == "loading":
        await asyncio.sleep(0.1)
    latencies: list[float] = []
    arrivals: dict = {}
    useful = keystrokes = errors = 0
    for n, case in enumerate(cases):
        uri = Path(f"/tmp/specfill-bench-lsp/{n}/{Path(case['path']).name}").as_uri()
        text = case["prefix"] + case["suffix"]
        client.text_document_did_open(types.DidOpenTextDocumentParams(
            text_document=types.TextDocumentItem(uri=uri, language_id="python", version=1, text=text)))

        def request(prefix: str, uri: str = uri):
            return asyncio.ensure_future(client.text_document_inline_completion_async(types.InlineCompletionParams(
                text_document=types.TextDocumentIdentifier(uri=uri), position=utf16_position(prefix, len(prefix)),
                context=types.InlineCompletionContext(trigger_kind=types.InlineCompletionTriggerKind.Automatic))))

        try:
            await asyncio.wait_for(request(case["prefix"]), 120)  # the cursor lands: untimed warm-up
        except Exception:
            errors += 1
        prefix = case["prefix"]
        pending = []
        for i, ch in enumerate(case["middle"]):
            pos = utf16_position(prefix, len(prefix))
            client.text_document_did_change(types.DidChangeTextDocumentParams(
                text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=i + 2),
                content_changes=[types.TextDocumentContentChangePartial(range=types.Range(start=pos, end=pos),
                                                                        text=ch)]))
            prefix += ch
            t0 = time.perf_counter()
            fut = request(prefix)
            fut.add_done_callback(lambda f, t0=t0: arrivals.__setitem__(f, time.perf_counter() - t0))
            pending.append(fut)
            await asyncio.wait({fut}, timeout=key_ms / 1000)
            keystrokes += 1
            if fut.done() and fut.exception() is None:  # shown before the next keystroke
                items = fut.result().items if fut.result() else []
                if items and continues(items[0].insert_text, case["middle"][i + 1:]):
                    useful += 1
            await asyncio.sleep(max(0.0, key_ms / 1000 - (time.perf_counter() - t0)))
        await asyncio.wait(pending, timeout=120)
        for fut in pending:
            if not fut.done() or fut.exception() is not None:
                errors += 1
            else:
                latencies.append(arrivals[fut] * 1000)
        client.text_document_did_close(types.DidCloseTextDocumentParams(
            text_document=types.TextDocumentIdentifier(uri=uri)))
        sys.stderr.write(f"\r{n + 1}/{len(cases)} cases")
    stats = await client.protocol.send_request_async("specfill/stats", {})
    await client.shutdown_async(None)
    client.exit(None)
    await client.stop()
    sys.stderr.write("\n")
    return {
        "n_cases": len(cases), "keystrokes": keystrokes, "key_ms": key_ms,
        "latency_ms": {"p50": pct(latencies, 0.5), "p95": pct(latencies, 0.95), "p99": pct(latencies, 0.99)},
        "answered": len(latencies),
        "ttft_ms": {"p50": stats.ttft_ms.p50, "p95": stats.ttft_ms.p95},
        "cache_hit_rate": stats.cache_hits / stats.requests if stats.requests else 0.0,
        "useful": useful / keystrokes if keystrokes else 0.0, "errors": errors + stats.errors,
        "server": {"requests": stats.requests, "cache_hits": stats.cache_hits, "superseded": stats.superseded,
                   "acceptance_rate": stats.acceptance_rate, "build": stats.build.build, "model": stats.model},
    }


def main(workload: str, key_ms: float, json_out: str | None, settings: dict | None = None) -> int:
    report = _run_sync(load_workload(workload), key_ms, settings or {})
    lat = report["latency_ms"]
    print(f"{report['n_cases']} cases, {report['keystrokes']} keystrokes at {key_ms:.0f} ms, model "
          f"{report['server']['model']}, build {report['server']['build']}")
    print(f"latency p50 {lat['p50']:.0f} ms, p95 {lat['p95']:.0f} ms, p99 {lat['p99']:.0f} ms over "
          f"{report['answered']} requests; TTFT p50 {report['ttft_ms']['p50']:.0f} ms")
    print(f"cache hits {report['cache_hit_rate']:.0%}, useful {report['useful']:.0%}, errors {report['errors']}")
    if json_out:
        Path(json_out).write_text(json.dumps(report, indent=2))
    return 0


def _run_sync(cases: list[dict], key_ms: float, settings: dict) -> dict:
    return asyncio.run(_run(cases, key_ms, settings))
