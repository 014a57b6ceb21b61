"""The reference to beat: llama-cpp-python's own Llama with LlamaPromptLookupDecoding.

It keeps an n_ctx x n_vocab logits buffer (logits_all is forced with a draft model), which
is part of what the bench's peak RSS shows.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import cast

import llama_cpp
from llama_cpp.llama_speculative import LlamaPromptLookupDecoding

from speculative.cpu_buffers import extra_buffer_types


class Anchor:
    def __init__(self, path: Path, n_ctx: int, threads: int) -> None:
        extra_buffer_types()  # as specfill's engine: AMX taken out, repacking kept
        self.llm = llama_cpp.Llama(str(path), n_ctx=n_ctx, n_threads=threads, n_threads_batch=threads,
                                   draft_model=LlamaPromptLookupDecoding(), flash_attn=False,
                                   logits_all=True, verbose=False)

    def warm(self, prompt: Sequence[int]) -> None:
        self.llm.create_completion(list(prompt), max_tokens=1, temperature=0.0)

    def generate(self, prompt: Sequence[int], max_tokens: int, stop: Sequence[str]) -> tuple[str, float, float, int]:
        """(text, ttft_ms, total_ms, chunks) of one greedy completion."""
        t0 = time.perf_counter()
        ttft = None
        text = ""
        chunks = 0
        stream = cast(Iterator[dict], self.llm.create_completion(  # stream=True: chunks, not one response
            list(prompt), max_tokens=max_tokens, temperature=0.0, repeat_penalty=1.0, stop=list(stop) or None,
            stream=True))
        for chunk in stream:
            if ttft is None:
                ttft = (time.perf_counter() - t0) * 1000
            text += chunk["choices"][0]["text"]
            chunks += 1
        total = (time.perf_counter() - t0) * 1000
        return text, ttft if ttft is not None else total, total, chunks

    def close(self) -> None:
        self.llm.close()
