"""Getting a model on request: `specfill model pull` against a hub on 127.0.0.1 (HF_ENDPOINT),
serving the embedded model's file under a name of the list. Progress, cancel and resume, a
damaged file refused, the hub down or without the file, a full disk: each ends with a clear
message and leaves no half file where a model is looked for."""

from __future__ import annotations

import json
import os
import resource
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from lsp_server.models.catalog import BY_NAME, CATALOG, hub_file, local_path, model_path
from speculative import ModelError, resolve_model_path
from tests.hub_server import Hub

TARGET = BY_NAME["qwen2.5-coder-0.5b"]  # served here with the embedded model's bytes


@pytest.fixture(scope="module")
def model_bytes() -> bytes:
    return resolve_model_path(None).read_bytes()


@pytest.fixture
def hub(model_bytes):
    hub = Hub(files={(TARGET.repo, TARGET.file): model_bytes})
    yield hub
    hub.close()


def env_for(endpoint: str, cache: Path) -> dict[str, str]:
    return {**os.environ, "HF_ENDPOINT": endpoint, "SPECFILL_CACHE_DIR": str(cache), "HF_HOME": str(cache / "hf"),
            "HF_HUB_DISABLE_TELEMETRY": "1", "HF_HUB_ETAG_TIMEOUT": "5"}


def start_pull(name: str, env: dict[str, str], **kw) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "lsp_server", "model", "pull", name, "--json"], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw)


def pull(name: str, env: dict[str, str], **kw) -> tuple[int, list[dict]]:
    proc = start_pull(name, env, **kw)
    out, err = proc.communicate(timeout=120)
    events = [json.loads(line) for line in out.splitlines() if line.strip()]
    assert events, err
    return proc.returncode, events


def in_cache(cache: Path) -> list[str]:
    return sorted(p.name for p in cache.rglob("*") if p.is_file() and "hf" not in p.relative_to(cache).parts)


def test_every_draft_partner_is_a_model_of_the_list_with_no_draft_of_its_own():
    for entry in CATALOG:
        if entry.draft:
            assert BY_NAME[entry.draft].draft == "", entry
        assert entry.file.endswith(".gguf") and entry.memory_mb > entry.size_mb
    assert hub_file("a-b/C.d_e/x.gguf") == ("a-b/C.d_e", "x.gguf", None)
    assert hub_file(TARGET.name)[2] is TARGET
    assert hub_file(f"{TARGET.repo}/{TARGET.file}")[2] is TARGET
    with pytest.raises(ModelError, match="neither a model of the list"):
        hub_file("qwen-huge")


def test_a_model_of_the_list_not_pulled_yet_names_the_pull(tmp_path, monkeypatch):
    monkeypatch.setenv("SPECFILL_CACHE_DIR", str(tmp_path))
    with pytest.raises(ModelError, match=f"specfill model pull {TARGET.name}"):
        model_path(TARGET.name)


def test_a_pull_reports_progress_checks_the_file_and_then_model_path_takes_its_name(hub, model_bytes, tmp_path,
                                                                                       monkeypatch):
    code, events = pull(TARGET.name, env_for(hub.url, tmp_path))
    assert code == 0, events
    progress = [e for e in events if e["event"] == "progress"]
    assert progress and progress[-1]["done"] == progress[-1]["total"] == len(model_bytes)
    assert [e["done"] for e in progress] == sorted(e["done"] for e in progress)
    done = events[-1]
    assert done["event"] == "done" and done["name"] == TARGET.name
    path = Path(done["path"])
    monkeypatch.setenv("SPECFILL_CACHE_DIR", str(tmp_path))
    assert path == local_path(TARGET.repo, TARGET.file) and path.read_bytes() == model_bytes
    assert set(in_cache(tmp_path)) - {f"{TARGET.file}.lock"} == {TARGET.file}
    assert model_path(TARGET.name) == path
    assert model_path(f"{TARGET.repo}/{TARGET.file}") == path
    # Pulled once: the next pull answers from the cache without asking the hub.
    asked = len(hub.requests)
    assert pull(TARGET.name, env_for(hub.url, tmp_path))[1][-1]["path"] == str(path)
    assert len(hub.requests) == asked


def test_a_cancelled_pull_resumes_where_it_stopped(hub, model_bytes, tmp_path, monkeypatch):
    monkeypatch.setenv("SPECFILL_CACHE_DIR", str(tmp_path))
    hub.bytes_per_s = 4e6
    env = env_for(hub.url, tmp_path)
    proc = start_pull(TARGET.name, env)
    for line in proc.stdout:  # type: ignore[union-attr]
        event = json.loads(line)
        if event["event"] == "progress" and event["done"] > 1_000_000:
            break
    proc.send_signal(signal.SIGTERM)  # what the editors' cancel sends
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 130
    assert json.loads(out.splitlines()[-1])["event"] == "cancelled"
    dest = local_path(TARGET.repo, TARGET.file)
    part = dest.with_name(dest.name + ".part")
    kept = part.stat().st_size
    assert 1_000_000 < kept < len(model_bytes) and not dest.exists()
    hub.bytes_per_s = None
    code, events = pull(TARGET.name, env)
    assert code == 0, events
    assert ("GET", f"/{TARGET.repo}/resolve/main/{TARGET.file}", f"bytes={kept}-") in hub.requests
    assert Path(events[-1]["path"]).read_bytes() == model_bytes and not part.exists()


def test_a_file_whose_sha256_is_not_the_hubs_is_deleted_not_used(hub, tmp_path):
    hub.sha_override = "0" * 64
    code, events = pull(TARGET.name, env_for(hub.url, tmp_path))
    assert code == 1 and events[-1]["event"] == "error"
    assert "arrived damaged" in events[-1]["message"] and "0" * 64 in events[-1]["message"]
    assert [n for n in in_cache(tmp_path) if n.endswith(".gguf") or n.endswith(".part")] == []


def test_the_hub_down_gives_the_offline_message(tmp_path):
    with socket.socket() as s:  # a loopback port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    code, events = pull(TARGET.name, env_for(f"http://127.0.0.1:{port}", tmp_path))
    assert code == 1
    assert "cannot reach the model hub" in events[-1]["message"] and "network" in events[-1]["message"]


def test_a_file_the_hub_does_not_have_names_the_list(hub, tmp_path):
    code, events = pull(f"{TARGET.repo}/no-such-file.gguf", env_for(hub.url, tmp_path))
    assert code == 1 and "has no no-such-file.gguf" in events[-1]["message"]
    code, events = pull("nobody/nothing/x.gguf", env_for(hub.url, tmp_path))
    assert code == 1 and "specfill model list" in events[-1]["message"]


def _small_file_limit() -> None:
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails (EFBIG) instead of killing
    resource.setrlimit(resource.RLIMIT_FSIZE, (2_000_000, 2_000_000))


def test_a_disk_that_fills_up_mid_pull_is_said_and_the_pull_resumes_later(hub, model_bytes, tmp_path, monkeypatch):
    monkeypatch.setenv("SPECFILL_CACHE_DIR", str(tmp_path))
    env = env_for(hub.url, tmp_path)
    code, events = pull(TARGET.name, env, preexec_fn=_small_file_limit)
    assert code == 1 and "cannot write" in events[-1]["message"] and "free some disk space" in events[-1]["message"]
    assert not local_path(TARGET.repo, TARGET.file).exists()
    code, events = pull(TARGET.name, env)
    assert code == 0 and Path(events[-1]["path"]).read_bytes() == model_bytes
    assert any(r == "bytes=2000000-" for _, _, r in hub.requests)


def test_too_little_free_space_is_refused_before_downloading(hub, tmp_path):
    small = tmp_path / "small"
    small.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=8m", "tmpfs", str(small)], capture_output=True,
                             check=False)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a small file system here: {mounted.stderr.decode().strip()}")
    try:
        code, events = pull(TARGET.name, env_for(hub.url, small))
        assert code == 1 and "not enough disk space" in events[-1]["message"]
        assert not [r for r in hub.requests if r[0] == "GET"]
    finally:
        subprocess.run(["umount", str(small)], check=False)


def test_any_hub_file_can_be_pulled_and_named_by_its_repo_and_file(hub, model_bytes, tmp_path, monkeypatch):
    spec = "someone/smol-GGUF/smol.gguf"
    hub.files[("someone/smol-GGUF", "smol.gguf")] = model_bytes
    code, events = pull(spec, env_for(hub.url, tmp_path))
    assert code == 0 and events[-1]["name"] == spec and events[-1]["draft"] == ""
    monkeypatch.setenv("SPECFILL_CACHE_DIR", str(tmp_path))
    assert model_path(spec) == Path(events[-1]["path"]) == local_path("someone/smol-GGUF", "smol.gguf")


def test_the_readme_lists_every_model_of_the_list_with_its_size_memory_and_draft():
    readme = (Path(__file__).parents[1] / "README.md").read_text()
    for e in CATALOG:
        row = f"| `{e.name}` | {e.size_mb / 1000:.1f} GB | {e.memory_mb / 1000:.1f} GB | "
        row += f"`{e.draft}` |" if e.draft else "|"
        assert row in readme, row


def test_check_on_a_pulled_model_names_its_draft_partner(hub, model_bytes, tmp_path):
    big = BY_NAME["qwen2.5-coder-1.5b"]
    hub.files[(big.repo, big.file)] = model_bytes
    env = env_for(hub.url, tmp_path)
    assert pull(big.name, env)[0] == 0
    out = subprocess.run([sys.executable, "-m", "lsp_server", "check", "--model", big.name], env=env,
                         capture_output=True, text=True, timeout=120, check=True).stdout
    assert str(tmp_path / "models" / "hub" / big.repo / big.file) in out
    assert f"draft partner {big.draft} (not pulled: specfill model pull {big.draft})" in out


def test_a_cache_folder_that_cannot_be_made_is_said_not_a_traceback(hub, tmp_path):
    (tmp_path / "a-file").write_text("not a folder")
    env = {**env_for(hub.url, tmp_path), "SPECFILL_CACHE_DIR": str(tmp_path / "a-file" / "cache")}
    code, events = pull(TARGET.name, env)
    assert code == 1 and events[-1]["event"] == "error"
    assert "cannot write the model cache" in events[-1]["message"]
