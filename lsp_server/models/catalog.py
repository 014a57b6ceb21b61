"""The curated list of FIM code models a user can pull by name, and where a pulled file lives.

The repos and files are the ones llama.cpp's FIM presets (`--fim-qwen-*`) and llama.vim's
README point at, and TheBloke's DeepSeek-Coder base files; a draft partner has the target's
vocabulary, so it can draft for it (`model.draftPath`). Sizes are the files' as published;
the download takes the hub's own figure.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from pathlib import Path

from speculative.cost_model import cache_dir
from speculative.errors import ModelError
from speculative.model_file import resolve_model_path

# What the server holds beside the weights and its KV cache (docs/performance.md, memory).
SERVER_MB = 250
N_CTX = 4096  # the memory figures are at the default model.nCtx


@dataclass(frozen=True)
class Entry:
    name: str          # what model.path accepts once pulled
    repo: str          # owner/name on the Hugging Face hub
    file: str
    size_mb: int       # the file
    kv_mb: int         # its KV cache at N_CTX tokens (f16 K and V, every layer)
    draft: str         # the catalog name of a same-vocabulary partner that drafts for it; "" = none
    machine: str       # for what machine, one line

    @property
    def memory_mb(self) -> int:
        return self.size_mb + self.kv_mb + SERVER_MB


CATALOG: tuple[Entry, ...] = (
    Entry("qwen2.5-coder-0.5b", "ggml-org/Qwen2.5-Coder-0.5B-Q8_0-GGUF", "qwen2.5-coder-0.5b-q8_0.gguf",
          531, 50, "", "any machine; the draft for the bigger Qwen2.5-Coder models"),
    Entry("qwen2.5-coder-1.5b", "ggml-org/Qwen2.5-Coder-1.5B-Q8_0-GGUF", "qwen2.5-coder-1.5b-q8_0.gguf",
          1647, 117, "qwen2.5-coder-0.5b", "a laptop CPU with 4 or more cores (llama.vim's pick without a GPU)"),
    Entry("qwen2.5-coder-3b", "ggml-org/Qwen2.5-Coder-3B-Q8_0-GGUF", "qwen2.5-coder-3b-q8_0.gguf",
          3286, 151, "qwen2.5-coder-0.5b", "a desktop CPU with 8 or more cores"),
    Entry("qwen2.5-coder-7b", "ggml-org/Qwen2.5-Coder-7B-Q8_0-GGUF", "qwen2.5-coder-7b-q8_0.gguf",
          8099, 235, "qwen2.5-coder-0.5b", "a fast desktop CPU with 16 GB, with its 0.5B draft"),
    Entry("deepseek-coder-1.3b", "TheBloke/deepseek-coder-1.3b-base-GGUF", "deepseek-coder-1.3b-base.Q8_0.gguf",
          1430, 805, "", "a laptop CPU with 4 or more cores; the draft for DeepSeek-Coder 6.7B"),
    Entry("deepseek-coder-6.7b", "TheBloke/deepseek-coder-6.7B-base-GGUF", "deepseek-coder-6.7b-base.Q4_K_M.gguf",
          4080, 2147, "deepseek-coder-1.3b", "a desktop CPU with 8 or more cores and 8 GB free, with its 1.3B draft"),
)
BY_NAME = {e.name: e for e in CATALOG}

# owner/name/file.gguf: a file of any hub repo, as `specfill model pull` takes it.
HUB_FILE = re.compile(r"^([\w.-]+/[\w.-]+)/([\w.-]+\.gguf)$")


def hub_file(spec: str) -> tuple[str, str, Entry | None]:
    """(repo, file, catalog entry or None) for a catalog name or owner/name/file.gguf."""
    entry = BY_NAME.get(spec)
    if entry:
        return entry.repo, entry.file, entry
    m = HUB_FILE.match(spec)
    if not m:
        names = ", ".join(BY_NAME)
        raise ModelError(f"{spec!r} is neither a model of the list ({names}) nor a hub file "
                         "written owner/name/file.gguf")
    return m.group(1), m.group(2), next((e for e in CATALOG if (e.repo, e.file) == m.groups()), None)


def local_path(repo: str, file: str) -> Path:
    """Where a pulled file lives: the cache, next to the converted weights."""
    return cache_dir() / "models" / "hub" / repo / file


def pulled(entry: Entry) -> Path | None:
    path = local_path(entry.repo, entry.file)
    return path if path.is_file() else None


def model_path(setting: str | None) -> Path:
    """model.path / model.draftPath: a catalog name (once pulled), a pulled owner/name/file.gguf,
    a packaged model's name or a GGUF path; empty = the embedded model."""
    entry = BY_NAME.get(setting or "")
    if entry is not None:
        path = pulled(entry)
        if path is None:
            raise ModelError(f"{entry.name} is not downloaded yet: run `specfill model pull {entry.name}`, "
                             "or choose it with the editor's specfill: Choose Model (Neovim: :SpecfillModel)")
        return resolve_model_path(str(path))
    m = HUB_FILE.match(setting or "")
    if m and not Path(setting or "").expanduser().exists() and (hub := local_path(*m.groups())).is_file():
        return resolve_model_path(str(hub))
    return resolve_model_path(setting or None)


def listing() -> list[dict]:
    """The list as the editors show it: each entry, its memory, and whether it is pulled."""
    out = []
    for e in CATALOG:
        path = pulled(e)
        out.append({**asdict(e), "memory_mb": e.memory_mb, "pulled": path is not None,
                    "path": str(path or local_path(e.repo, e.file))})
    return out
