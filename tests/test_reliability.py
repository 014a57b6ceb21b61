"""Reliability: document sync under random incremental edits, cancel storms, a typing replay
at 20 requests/s, and no network. Short runs here; `specfill stress` runs the long ones."""

import os

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from lsp_helpers import SERVER, client_fixture, stats, wait_ready
from pygls.workspace import TextDocument
from pytest_lsp import LanguageClient

from bench.stress import ALPHABET, change, run_cancels, run_edits, run_replay

client = client_fixture({"specfill": {"completion": {"minConfidence": 0, "maxTokens": 16}}})
# concurrent.futures.ThreadPoolExecutor's default size, which pygls's thread pool takes
DEFAULT_EXECUTOR_THREADS = min(32, (os.cpu_count() or 1) + 4)
SAMPLE = "import math\n\n\ndef area_of_circle(radius):\n    return math.pi * radius ** 2\n\n\ndef area(side):\n    "


PIECES = st.lists(st.sampled_from(ALPHABET), max_size=5).map("".join)


def _offset(text: str, fraction: float) -> int:
    o = round(fraction * len(text))
    return o + 1 if 0 < o < len(text) and text[o - 1] == "\r" and text[o] == "\n" else o


@settings(max_examples=400, deadline=None)
@given(start=PIECES, edits=st.lists(st.tuples(st.floats(0, 1), st.floats(0, 1), PIECES), max_size=40))
def test_the_servers_document_model_follows_any_edit_sequence(start, edits):
    """pygls's incremental sync (what the server holds) against the client's own text, with
    UTF-16 positions over astral characters, CRLF, insertions and deletions across lines."""
    doc = TextDocument("file:///tmp/h.py", start, version=1)
    text = start
    for fa, fb, new in edits:
        a, b = sorted((_offset(text, fa), _offset(text, fb)))
        doc.apply_change(change(text, a, b, new))
        text = text[:a] + new + text[b:]
        assert doc.source == text


@pytest.mark.asyncio
async def test_random_incremental_edits_keep_the_server_in_sync(client: LanguageClient):
    report = await run_edits(client, "file:///tmp/specfill-test/edits.py", 400, seed=1, check_every=20)
    assert report.edits == 400 and report.checks == 20
    assert report.mismatches == 0


@pytest.mark.asyncio
async def test_a_cancel_storm_leaves_no_work_running_and_no_extra_threads(client: LanguageClient):
    await wait_ready(client)
    # A first storm starts most of the threads pools make on demand; a leak grows with the
    # requests of the second.
    await run_cancels(client, "file:///tmp/specfill-test/storm-first.py", SAMPLE, 30, seed=1)
    report = await run_cancels(client, "file:///tmp/specfill-test/storm.py", SAMPLE, 150, seed=2)
    assert report.cancels + report.answered == 150 and report.cancels > 0
    assert report.steps_settled  # nothing decoding once the storm is over
    # pygls reads stdin through its thread pool, which starts a thread whenever a read comes
    # while none is idle, up to its default size: how many depends on the timing of
    # messages, not on the requests. A leak per request or cancel outgrows that bound.
    assert report.threads_after <= report.threads_before + DEFAULT_EXECUTOR_THREADS
    s = await stats(client)
    assert s["errors"] == 0


@pytest.mark.asyncio
async def test_typing_replay_at_20_requests_a_second(client: LanguageClient):
    await wait_ready(client)
    pid = client._server.pid
    report = await run_replay(client, "file:///tmp/specfill-test/replay.py", SAMPLE * 3, 8.0, 20.0, pid)
    assert report["requests"] >= 140 and report["errors"] == 0
    assert report["latency_ms"]["p99"] > 0
    assert report["rss_growth_mb"] < 20


def inet_socket_inodes(pid: int) -> set[str]:
    """Inodes of the process's IP sockets (TCP/UDP/raw, v4 and v6)."""
    inodes = set()
    for table in ("tcp", "tcp6", "udp", "udp6", "raw", "raw6"):
        with open(f"/proc/{pid}/net/{table}") as f:
            inodes |= {line.split()[9] for line in list(f)[1:]}
    return inodes


@pytest.mark.asyncio
async def test_the_server_opens_no_network_socket_without_a_remote_url(client: LanguageClient):
    """No network: after loading and completing, none of the process's sockets is an IP
    socket (asyncio's own wake-up socketpair is a Unix socket; stdio is pipes)."""
    await wait_ready(client)
    pid = client._server.pid
    await run_replay(client, "file:///tmp/specfill-test/net.py", SAMPLE, 1.0, 10.0, pid)
    fds = f"/proc/{pid}/fd"
    links = [os.readlink(os.path.join(fds, f)) for f in os.listdir(fds)]
    sockets = {link[len("socket:["):-1] for link in links if link.startswith("socket:[")}
    assert not sockets & inet_socket_inodes(pid), links
    with open("/proc/net/unix") as f:
        unix = {line.split()[6] for line in list(f)[1:]}
    assert sockets <= unix  # every socket it holds is a Unix one


assert SERVER  # the same server command as every end-to-end test
