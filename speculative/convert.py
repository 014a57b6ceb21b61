"""Model weights converted once to Q4_0, the layout llama.cpp's repacked CPU kernels read fastest.

Q4_0 with repacking reads prompts and decodes faster than the shipped Q4_1 SmolLM2, with
batched and one-row evaluation still identical, at a small cost in next-token accuracy
(`specfill bench-engine`; figures in docs/performance.md). `model.weights`
chooses: `auto` converts 4-bit files (a like-for-like change of layout) and keeps others as
shipped, `q4_0` converts any file, `shipped` never converts. The result lives in the cache
directory, named by the source file's hash, written whole or not at all.
"""

from __future__ import annotations

import hashlib
import logging
import os
from pathlib import Path

import llama_cpp

from speculative.cost_model import cache_dir
from speculative.errors import ModelError
from speculative.model_file import check_gguf
from speculative.vocab import Vocab

log = logging.getLogger("specfill")

# GGUF general.file_type values (llama_ftype) of 4-bit files: converting them to Q4_0 changes
# the layout, not the class of precision.
FOUR_BIT = {int(getattr(llama_cpp, f"LLAMA_FTYPE_MOSTLY_{name}"))
            for name in ("Q4_1", "Q4_K_S", "Q4_K_M", "IQ4_NL", "IQ4_XS")}
Q4_0 = int(llama_cpp.LLAMA_FTYPE_MOSTLY_Q4_0)


def file_type(path: Path) -> int | None:
    """general.file_type of a GGUF file, read with its vocabulary only (no weights)."""
    vocab = Vocab.load(path)
    try:
        value = vocab.metadata("general.file_type")
        return int(value) if value and value.isdigit() else None
    finally:
        vocab.close()


def sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()


def converted_path(source: Path) -> Path:
    return cache_dir() / "models" / f"{source.stem}.{sha256(source)[:16]}.Q4_0.gguf"


def wants_conversion(source: Path, weights: str) -> bool:
    if weights == "shipped":
        return False
    kind = file_type(source)
    if kind == Q4_0:
        return False
    return weights == "q4_0" or kind in FOUR_BIT


def convert(source: Path, target: Path, threads: int = 0) -> Path:
    """Write `source` quantized to Q4_0 at `target` (through a temporary file)."""
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    params = llama_cpp.llama_model_quantize_default_params()
    params.ftype = Q4_0
    params.allow_requantize = True
    params.nthread = threads
    try:
        if llama_cpp.llama_model_quantize(str(source).encode(), str(tmp).encode(), params) != 0:
            raise ModelError(f"could not convert {source} to Q4_0")
        os.replace(tmp, target)
    except OSError as exc:
        raise ModelError(f"could not write the converted model to {target.parent}: {exc.strerror or exc}") from exc
    finally:
        tmp.unlink(missing_ok=True)
    return target


def weights_path(source: Path, weights: str = "auto", rebuild: bool = False) -> Path:
    """The file to load for `source` under the `weights` setting: converted once, then reused.
    A converted file that fails the header check, or `rebuild`, is made again."""
    if not wants_conversion(source, weights):
        return source
    target = converted_path(source)
    if target.exists() and not rebuild:
        try:
            check_gguf(target)
            return target
        except ModelError as exc:
            log.warning("converted model %s is damaged (%s); converting again", target, exc)
    log.info("converting %s to Q4_0 (once) into %s", source.name, target.parent)
    return convert(source, target)
