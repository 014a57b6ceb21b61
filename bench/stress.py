"""Reliability under load, against the real server over stdio: random incremental edits
(the server's text must equal the client's), cancel storms (no work left running, no thread
growth) and a typing replay at a fixed request rate (RSS growth, p99). `specfill stress`
runs the long variants; the tests run short ones with the same code.
"""

from __future__ import annotations

import asyncio
import random
import sys
import time
from dataclasses import dataclass

from lsprotocol import types

from bench.demo import sample_text
from bench.lsp_client import server_pid, server_stats, start_server, stop_server
from bench.memory import rss_mb
from bench.positions import utf16_position
from lsp_server.session.stats import percentiles

# Edits mix ASCII, accents, CJK, astral characters (UTF-16 surrogate pairs) and both line endings.
ALPHABET = ["a", "b", "x", " ", "    ", "(", ")", ":", "é", "中", "𝄞", "😀", "\n", "\r\n", "def f():\n    return 1\n"]


def _valid_offset(text: str, offset: int) -> bool:
    return not (0 < offset < len(text) and text[offset - 1] == "\r" and text[offset] == "\n")


def random_edit(rng: random.Random, text: str) -> tuple[int, int, str]:
    """(start, end, new text) in code points: an insertion, a deletion (possibly across
    lines) or a replacement; never inside a \\r\\n pair."""
    def offset() -> int:
        while True:
            o = rng.randint(0, len(text))
            if _valid_offset(text, o):
                return o

    a, b = sorted((offset(), offset()))
    kind = rng.random()
    if kind < 0.5 or not text:
        b = a  # insert
    elif b - a > 200:
        b = a + 200
        while not _valid_offset(text, b):
            b += 1
    new = "" if 0.5 <= kind < 0.8 else "".join(rng.choice(ALPHABET) for _ in range(rng.randint(1, 6)))
    return a, b, new


def change(text: str, start: int, end: int, new: str) -> types.TextDocumentContentChangePartial:
    return types.TextDocumentContentChangePartial(
        range=types.Range(start=utf16_position(text, start), end=utf16_position(text, end)), text=new)


async def server_text(client, uri: str) -> str | None:
    result = await client.protocol.send_request_async("specfill/document", {"uri": uri})
    return None if result is None else (result["text"] if isinstance(result, dict) else result.text)


@dataclass
class EditReport:
    edits: int = 0
    checks: int = 0
    mismatches: int = 0


async def run_edits(client, uri: str, n: int, seed: int, check_every: int = 25, text: str = "") -> EditReport:
    """Open `uri` with `text`, apply `n` random edits (one didChange each, 1-3 changes), and
    compare the server's text with the client's every `check_every` edits and at the end."""
    rng = random.Random(seed)
    version = 1
    client.text_document_did_open(types.DidOpenTextDocumentParams(
        text_document=types.TextDocumentItem(uri=uri, language_id="python", version=version, text=text)))
    report = EditReport()
    for i in range(n):
        changes = []
        for _ in range(rng.randint(1, 3)):  # several changes in one notification apply in order
            start, end, new = random_edit(rng, text)
            changes.append(change(text, start, end, new))
            text = text[:start] + new + text[end:]
        version += 1
        client.text_document_did_change(types.DidChangeTextDocumentParams(
            text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=version), content_changes=changes))
        report.edits += 1
        if (i + 1) % check_every == 0 or i == n - 1:
            report.checks += 1
            if await server_text(client, uri) != text:
                report.mismatches += 1
    return report


def _inline(uri: str, pos: types.Position) -> types.InlineCompletionParams:
    return types.InlineCompletionParams(
        text_document=types.TextDocumentIdentifier(uri=uri), position=pos,
        context=types.InlineCompletionContext(trigger_kind=types.InlineCompletionTriggerKind.Automatic))


@dataclass
class CancelReport:
    cancels: int = 0
    answered: int = 0  # finished before their cancel arrived
    threads_before: int = 0
    threads_after: int = 0
    steps_settled: bool = False  # decode steps stopped growing once the storm was over


async def run_cancels(client, uri: str, text: str, n: int, seed: int) -> CancelReport:
    """`n` requests, each cancelled after a random 0-40 ms; then check nothing keeps decoding
    and the server has no more threads than before."""
    rng = random.Random(seed)
    client.text_document_did_open(types.DidOpenTextDocumentParams(
        text_document=types.TextDocumentItem(uri=uri, language_id="python", version=1, text=text)))
    report = CancelReport(threads_before=int((await server_stats(client))["threads"]))
    pos = utf16_position(text, len(text))
    for i in range(n):
        msg_id = f"storm-{seed}-{i}"
        req = asyncio.ensure_future(client.protocol.send_request_async(
            types.TEXT_DOCUMENT_INLINE_COMPLETION, _inline(uri, pos), msg_id=msg_id))
        await asyncio.sleep(rng.uniform(0, 0.04))
        client.protocol.notify("$/cancelRequest", types.CancelParams(id=msg_id))
        try:
            await req
            report.answered += 1
        except Exception:
            report.cancels += 1
    await asyncio.sleep(0.5)
    steps = (await server_stats(client))["decode_steps"]
    await asyncio.sleep(1.0)
    after = await server_stats(client)
    report.steps_settled = after["decode_steps"] == steps
    report.threads_after = int(after["threads"])
    return report


async def run_replay(client, uri: str, text: str, seconds: float, rate: float, pid: int) -> dict:
    """Type `text` (looping) at `rate` keystrokes a second, one request each, for `seconds`."""
    client.text_document_did_open(types.DidOpenTextDocumentParams(
        text_document=types.TextDocumentItem(uri=uri, language_id="python", version=1, text="")))
    doc, version, errors, latencies = "", 1, 0, []
    rss0 = rss_mb(pid)
    t_end = time.monotonic() + seconds
    pending: set[asyncio.Future] = set()
    i = 0

    async def one(pos: types.Position) -> None:
        nonlocal errors
        t0 = time.perf_counter()
        try:
            await client.text_document_inline_completion_async(_inline(uri, pos))
            latencies.append((time.perf_counter() - t0) * 1000)
        except Exception:
            errors += 1

    while time.monotonic() < t_end:
        ch = text[i % len(text)]
        i += 1
        version += 1
        client.text_document_did_change(types.DidChangeTextDocumentParams(
            text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=version),
            content_changes=[change(doc, len(doc), len(doc), ch)]))
        doc += ch
        task = asyncio.ensure_future(one(utf16_position(doc, len(doc))))
        pending.add(task)
        task.add_done_callback(pending.discard)
        await asyncio.sleep(1 / rate)
    if pending:
        await asyncio.wait(pending, timeout=30)
    return {"requests": i, "errors": errors, "latency_ms": percentiles(latencies), "rss_start_mb": rss0,
            "rss_end_mb": rss_mb(pid),
            "rss_growth_mb": rss_mb(pid) - rss0}


async def _main(edits: int, cancels: int, seconds: float, rate: float, seed: int) -> dict:
    client = await start_server("specfill-stress")
    pid = server_pid(client)
    out: dict = {}
    t0 = time.perf_counter()
    e = await run_edits(client, "file:///tmp/specfill-stress/edits.py", edits, seed)
    out["edits"] = {**vars(e), "seconds": round(time.perf_counter() - t0, 1)}
    print(f"edits: {e.edits} applied, {e.checks} checks, {e.mismatches} mismatches", file=sys.stderr)
    sample = sample_text()
    c = await run_cancels(client, "file:///tmp/specfill-stress/cancel.py", sample, cancels, seed)
    out["cancels"] = vars(c)
    print(f"cancels: {c.cancels} cancelled, {c.answered} answered first, decode settled {c.steps_settled}, "
          f"threads {c.threads_before} -> {c.threads_after}", file=sys.stderr)
    r = await run_replay(client, "file:///tmp/specfill-stress/replay.py", sample, seconds, rate, pid)
    out["replay"] = r
    print(f"replay: {r['requests']} requests at {rate}/s for {seconds:.0f} s, {r['errors']} errors, "
          f"p50/p95/p99 {r['latency_ms']['p50']:.0f}/{r['latency_ms']['p95']:.0f}/{r['latency_ms']['p99']:.0f} ms, "
          f"RSS {r['rss_start_mb']:.0f} -> {r['rss_end_mb']:.0f} MB", file=sys.stderr)
    await stop_server(client)
    return out


def main(edits: int, cancels: int, seconds: float, rate: float, seed: int, json_out: str | None) -> int:
    import json

    out = asyncio.run(_main(edits, cancels, seconds, rate, seed))
    text = json.dumps(out, indent=1)
    print(text)
    if json_out:
        with open(json_out, "w") as f:
            f.write(text + "\n")
    bad = out["edits"]["mismatches"] or not out["cancels"]["steps_settled"] or out["replay"]["errors"]
    return 1 if bad else 0

