"""The whole server on a remote engine, over stdio: the same pipeline in front of a real
OpenAI-style server on loopback; an engine that is down is said once, and the server
recovers when it comes up."""

import asyncio

import pytest
from lsp_helpers import TEXT, client_fixture, complete, end_of, field, open_doc, stats, wait_ready
from pytest_lsp import LanguageClient
from remote_helpers import free_port, openai_engine

pytestmark = pytest.mark.remote

UP, DOWN = free_port(), free_port()


def settings(port: int) -> dict:
    return {"specfill": {"model": {"remote": {"url": f"http://127.0.0.1:{port}", "kind": "openai",
                                              "readTimeoutMs": 20000}},
                         "completion": {"debounceMs": 0, "budgetMs": 20000}}}


@pytest.fixture(scope="module", autouse=True)
def engine(model_path, tmp_path_factory):
    running = openai_engine(model_path, tmp_path_factory.mktemp("engine"), port=UP)
    yield running
    running.kill()


client = client_fixture(settings(UP))
down_client = client_fixture(settings(DOWN))


@pytest.mark.asyncio
async def test_inline_completion_from_the_remote_engine(client: LanguageClient):
    s = await wait_ready(client)
    assert field(s, "family") == "remote openai" and f"127.0.0.1:{UP}" in field(s, "model")
    open_doc(client)
    line, col = end_of(TEXT)
    items = (await complete(client, line, col)).items
    assert items and items[0].insert_text.strip()
    s = await stats(client)
    assert field(field(s, "remote"), "requests") >= 1 and field(s, "errors") == 0
    assert field(s, "decode_steps") == 0, "no local model was loaded"


@pytest.mark.asyncio
async def test_engine_down_is_said_once_then_recovers(down_client: LanguageClient, model_path, tmp_path):
    await wait_ready(down_client)
    open_doc(down_client)
    line, col = end_of(TEXT)
    for _ in range(3):
        assert not (await complete(down_client, line, col)).items
    s = await stats(down_client)
    assert field(s, "errors") == 3 and field(s, "state") == "ready"
    told = [m.message for m in down_client.messages if "cannot connect" in m.message]
    assert len(told) == 2 and "not answering yet" in told[0] and "completion failed" in told[1], told
    engine = openai_engine(model_path, tmp_path, port=DOWN)
    try:
        for _ in range(20):
            if (await complete(down_client, line, col)).items:
                break
            await asyncio.sleep(0.5)
        else:
            raise AssertionError("no suggestion after the engine came up")
    finally:
        engine.kill()
