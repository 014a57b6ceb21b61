"""`specfill demo`: the real server over stdio, typing replayed into a sample file."""

from __future__ import annotations

import asyncio
import tempfile
import time
from importlib import resources
from pathlib import Path

from lsprotocol import types

from bench.lsp_client import server_stats, start_server, stop_server

TYPED = "\n    return "


def sample_text() -> str:
    """The sample file the demo types into (package data beside it)."""
    return resources.files("bench").joinpath("demo_sample.txt").read_text(encoding="utf-8")


async def _demo(model: str | None, file: str | None) -> int:
    t0 = time.perf_counter()
    client = await start_server("specfill-demo", {"model": {"path": model or ""}}, wait_ready=False)
    messages: list[str] = []

    @client.feature(types.WINDOW_SHOW_MESSAGE)
    def show(params: types.ShowMessageParams) -> None:
        messages.append(params.message)
        print(f"[server] {params.message}")

    while (state := (await server_stats(client))["state"]) == "loading":
        await asyncio.sleep(0.1)
    print(f"model {state} after {time.perf_counter() - t0:.1f} s")
    if file is None:
        path = Path(tempfile.mkdtemp(prefix="specfill-demo-")) / "shapes.py"
        path.write_text(sample_text())
    else:
        path = Path(file).resolve()
    uri = path.as_uri()
    text = path.read_text().rstrip("\n")
    client.text_document_did_open(types.DidOpenTextDocumentParams(
        text_document=types.TextDocumentItem(uri=uri, language_id="python", version=1, text=text)))
    lines = text.split("\n")
    line, col = len(lines) - 1, len(lines[-1])
    version = 1
    print(f"typing {TYPED!r} at the end of {path.name}")
    for ch in TYPED:
        version += 1
        client.text_document_did_change(types.DidChangeTextDocumentParams(
            text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=version),
            content_changes=[types.TextDocumentContentChangePartial(
                range=types.Range(start=types.Position(line=line, character=col),
                                  end=types.Position(line=line, character=col)), text=ch)]))
        if ch == "\n":
            line, col = line + 1, 0
        else:
            col += 1
        t0 = time.perf_counter()
        result = await client.text_document_inline_completion_async(types.InlineCompletionParams(
            text_document=types.TextDocumentIdentifier(uri=uri),
            position=types.Position(line=line, character=col),
            context=types.InlineCompletionContext(trigger_kind=types.InlineCompletionTriggerKind.Automatic)))
        ms = (time.perf_counter() - t0) * 1000
        items = result.items if isinstance(result, types.InlineCompletionList) else (result or [])
        shown = items[0].insert_text if items else ""
        print(f"{ms:7.0f} ms  after {ch!r:6} -> {shown!r}")
    await stop_server(client)
    return 1 if messages else 0


def run_demo(model: str | None, file: str | None) -> int:
    return asyncio.run(_demo(model, file))
