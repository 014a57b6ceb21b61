"""Which llama.cpp build is loaded: batch-invariant (llamafile sgemm off) or stock."""

from __future__ import annotations

import functools

import llama_cpp


@functools.cache
def build_info() -> dict[str, object]:
    info = llama_cpp.llama_print_system_info().decode(errors="replace")
    llamafile = "LLAMAFILE = 1" in info
    return {
        "llama_cpp_python": llama_cpp.__version__,
        "llamafile_sgemm": llamafile,
        # With the llamafile kernels off, batched and one-row evaluation round alike.
        "batch_invariant": not llamafile,
        "build": "stock" if llamafile else "llamafile-off",
    }
