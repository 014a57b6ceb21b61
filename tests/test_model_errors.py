"""A missing model, a non-GGUF file and a truncated GGUF each give a clear error."""

import subprocess
import sys

import pytest

from speculative import Engine, ModelError, resolve_model_path

SAMPLE = "bench/demo_sample.txt"


@pytest.fixture
def truncated(tmp_path, model_path):
    path = tmp_path / "truncated.gguf"
    with model_path.open("rb") as fh:
        path.write_bytes(fh.read(2_000_000))
    return path


@pytest.fixture
def not_gguf(tmp_path):
    path = tmp_path / "weights.gguf"
    path.write_bytes(b"PK\x03\x04 this is a zip, not a model" * 10)
    return path


def test_missing_path_names_it(tmp_path):
    with pytest.raises(ModelError, match="not found: .*nope.gguf"):
        resolve_model_path(str(tmp_path / "nope.gguf"))


def test_non_gguf_is_rejected(not_gguf):
    with pytest.raises(ModelError, match="not a GGUF"):
        Engine(not_gguf)


def test_truncated_gguf_is_rejected(truncated):
    with pytest.raises(ModelError, match="could not load"):
        Engine(truncated)


@pytest.mark.parametrize("kind", ["missing", "not_gguf", "truncated"])
def test_cli_exits_2_with_message(kind, tmp_path, request):
    path = tmp_path / "missing.gguf" if kind == "missing" else request.getfixturevalue(kind)
    proc = subprocess.run(
        [sys.executable, "-m", "lsp_server", "complete", SAMPLE, "--line", "1", "--col", "0",
         "--model", str(path)], check=False, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    assert str(path) in proc.stderr


def test_cli_position_out_of_range():
    proc = subprocess.run([sys.executable, "-m", "lsp_server", "complete", SAMPLE, "--line", "999",
                           "--col", "0"], check=False, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "outside" in proc.stderr


def test_cli_prints_completion_and_timings():
    proc = subprocess.run([sys.executable, "-m", "lsp_server", "complete", SAMPLE, "--line", "8",
                           "--col", "0"], check=False, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "ttft" in proc.stderr and "tok/s" in proc.stderr
