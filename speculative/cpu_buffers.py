"""llama.cpp's extra CPU buffer types, with AMX taken out of the list.

The extra buffer types hold weights in layouts made for faster kernels: CPU_REPACK
interleaves Q4_0 rows for AVX2/AVX-512 (prompts read much faster than plain Q4_1), AMX
uses Intel's tile unit. AMX crashed in ggml_backend_amx_mul_mat on one machine (SIGSEGV on the
first decode), and llama.cpp's only switch (use_extra_bufts) turns all of them off. The CPU
backend hands llama.cpp a null-terminated array that it keeps for the life of the process;
taking AMX out of that array before the first model loads turns off AMX alone.
"""

from __future__ import annotations

import ctypes
import functools
from pathlib import Path

import llama_cpp

_DEVICE_CPU = 0  # GGML_BACKEND_DEVICE_TYPE_CPU
UNSAFE = ("AMX",)


def _lib(name: str) -> ctypes.CDLL:
    return ctypes.CDLL(str(Path(llama_cpp.__file__).parent / "lib" / name))


@functools.cache
def extra_buffer_types(drop: tuple[str, ...] = UNSAFE) -> tuple[str, ...]:
    """The extra buffer types llama.cpp will use, after taking out those whose names start with
    one of `drop`. Call it before the first model loads (the models loaded after it see it)."""
    base, ggml = _lib("libggml-base.so"), _lib("libggml.so")
    ggml.ggml_backend_dev_by_type.restype = ctypes.c_void_p
    ggml.ggml_backend_dev_by_type.argtypes = [ctypes.c_int]
    base.ggml_backend_dev_backend_reg.restype = ctypes.c_void_p
    base.ggml_backend_dev_backend_reg.argtypes = [ctypes.c_void_p]
    base.ggml_backend_reg_get_proc_address.restype = ctypes.c_void_p
    base.ggml_backend_reg_get_proc_address.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
    base.ggml_backend_buft_name.restype = ctypes.c_char_p
    base.ggml_backend_buft_name.argtypes = [ctypes.c_void_p]
    dev = ggml.ggml_backend_dev_by_type(_DEVICE_CPU)
    proc = dev and base.ggml_backend_reg_get_proc_address(base.ggml_backend_dev_backend_reg(dev),
                                                          b"ggml_backend_dev_get_extra_bufts")
    if not proc:
        return ()
    array = ctypes.CFUNCTYPE(ctypes.POINTER(ctypes.c_void_p), ctypes.c_void_p)(proc)(dev)
    found: list[int] = []
    while array[len(found)]:
        found.append(array[len(found)])
    keep = [b for b in found if not base.ggml_backend_buft_name(b).decode().startswith(drop)]
    for i, buft in enumerate(keep):
        array[i] = buft
    array[len(keep)] = None  # the array ends at the first null
    return tuple(base.ggml_backend_buft_name(b).decode() for b in keep)
