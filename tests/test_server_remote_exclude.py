"""The text of a file kept out of prompts (context.exclude) never reaches an engine: a real
llama-server on loopback behind a proxy that records every request body it received."""

import pytest
from lsp_helpers import TEXT, client_fixture, complete, end_of, open_doc, wait_ready
from pytest_lsp import LanguageClient
from remote_helpers import Recorder, free_port, llama_server
from test_server_controls import SECRET, SURE, open_as

pytestmark = pytest.mark.remote

PROXY = free_port()
VISIBLE = "SPECFILL_TEST_VISIBLE_4b2e = 'shown as context'\n"


@pytest.fixture(scope="module", autouse=True)
def recorded(model_path, tmp_path_factory):
    engine = llama_server(model_path, tmp_path_factory.mktemp("engine"))
    proxy = Recorder(engine.url, port=PROXY)
    yield proxy
    proxy.close()
    engine.kill()


# The smollm template spells other files' text into the prompt (file separators), when asked to.
client = client_fixture({"specfill": {"model": {"remote": {"url": f"http://127.0.0.1:{PROXY}", "kind": "llama-server",
                                                           "template": "smollm", "readTimeoutMs": 20000}},
                                      "completion": SURE, "context": {"otherFilesChars": 2000}}})


@pytest.mark.asyncio
async def test_text_of_a_file_kept_out_never_reaches_a_remote_engine(recorded: Recorder, client: LanguageClient):
    """The .env is open, and opened last (the most recent context first): the visible file's
    text arrives at the engine, the secret's never does, nor does a request from inside it."""
    await wait_ready(client)
    open_as(client, "file:///tmp/specfill-test/visible.py", VISIBLE, "python")
    open_as(client, "file:///tmp/specfill-test/.env", SECRET, "dotenv")
    assert not (await complete(client, 1, 0, uri="file:///tmp/specfill-test/.env")).items
    open_doc(client)
    await complete(client, *end_of(TEXT))
    await complete(client, *end_of(TEXT), invoked=False)
    sent = "\n".join(recorded.bodies)
    assert "SPECFILL_TEST_VISIBLE_4b2e" in sent, "context from open files reached the engine"
    assert "SPECFILL_TEST_SECRET_7f3a" not in sent and "hunter2" not in sent
