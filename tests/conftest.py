import pytest

from speculative import Engine, resolve_model_path


@pytest.fixture(scope="session")
def model_path():
    return resolve_model_path(None)


@pytest.fixture(scope="session")
def engine(model_path):
    eng = Engine(model_path, n_ctx=2048)
    yield eng
    eng.close()
