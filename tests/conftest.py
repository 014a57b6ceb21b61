import os
import tempfile

import pytest

from speculative import Engine, resolve_model_path

# Hermetic: cost tables profiled by tests (and servers they start) go to a fresh folder.
os.environ.setdefault("SPECFILL_CACHE_DIR", tempfile.mkdtemp(prefix="specfill-test-cache-"))
# No request leaves the machine: a hub request nobody pointed at a test hub meets a closed port.
os.environ["HF_ENDPOINT"] = "http://127.0.0.1:9"
os.environ["HF_HUB_DISABLE_TELEMETRY"] = "1"


@pytest.fixture(scope="session")
def model_path():
    return resolve_model_path(None)


@pytest.fixture(scope="session")
def gemma_path():
    return resolve_model_path("gemma3-270m")


@pytest.fixture(scope="session")
def engine(model_path):
    eng = Engine(model_path, n_ctx=2048)
    yield eng
    eng.close()


@pytest.fixture(scope="session")
def costs(engine):
    from speculative.build_info import build_info
    from speculative.cost_model import load_cost_model

    return load_cost_model(engine, engine.n_threads, build_info()["build"])
