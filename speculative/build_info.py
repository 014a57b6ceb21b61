"""Which llama.cpp build is loaded: batch-invariant (llamafile sgemm off) or stock."""

from __future__ import annotations

import ctypes
import functools
from pathlib import Path
from typing import TypedDict

import llama_cpp

KERNEL_FEATURES = ("avx", "avx2", "fma", "f16c", "avx512", "avx512_vnni", "avx512_bf16", "amx_int8")


class BuildInfo(TypedDict):
    llama_cpp_python: str
    llamafile_sgemm: bool
    batch_invariant: bool
    build: str
    kernels: list[str]


@functools.cache
def build_info() -> BuildInfo:
    # ggml's CPU backend says itself whether the llamafile sgemm kernels were compiled in;
    # llama_print_system_info no longer lists it.
    cpu = ctypes.CDLL(str(Path(llama_cpp.__file__).parent / "lib" / "libggml-cpu.so"))
    llamafile = bool(cpu.ggml_cpu_has_llamafile())
    return {
        "llama_cpp_python": llama_cpp.__version__,
        "llamafile_sgemm": llamafile,
        # With the llamafile kernels off, batched and one-row evaluation round alike.
        "batch_invariant": not llamafile,
        "build": "stock" if llamafile else "llamafile-off",
        # The instruction sets the kernels were compiled for: a build for AVX2 computes
        # other roundings than one for AVX-512 on the same CPU.
        "kernels": [f for f in KERNEL_FEATURES if getattr(cpu, f"ggml_cpu_has_{f}", lambda: 0)()],
    }
