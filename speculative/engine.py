"""Greedy decoding on llama.cpp's low-level API with KV prefix reuse, per sequence.

One Engine owns one model and one long-lived context. Each llama.cpp sequence caches one
prompt (FULL: the full prompt of where the user works; SHORT and the next SHORT_SEQS - 1: short
prompts that answer at once while a full one is read, one per place typed at lately; the rest:
candidates' branches). A request evaluates only the tokens after the longest common prefix
with what its sequence holds, and asks for logits only on the rows it reads (no logits_all
buffer). A sequence's cache can be saved to
memory and loaded back (`save_seq`/`load_seq`), so moving between places reads nothing again.
"""

from __future__ import annotations

import ctypes
import mmap
import os
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import llama_cpp
import numpy as np

from speculative.cpu_buffers import extra_buffer_types
from speculative.errors import Cancelled, ModelError
from speculative.kept import KEPT_ROW_BYTES, Kept
from speculative.model_file import check_gguf
from speculative.read_abort import ReadAbort
from speculative.seqs import FIRST_BRANCH, FULL, MAX_SEQS, SHORT, SHORT_SEQS
from speculative.vocab import Vocab


@llama_cpp.llama_log_callback
def _quiet_log(level, text, user_data):
    # llama.cpp logs every load to stderr; the server's stderr is the editor's log.
    if os.environ.get("SPECFILL_LLAMA_LOG"):
        os.write(2, text)


llama_cpp.llama_log_set(_quiet_log, ctypes.c_void_p(0))
llama_cpp.llama_backend_init()


def _fill_batch(b: Any, items: Sequence[tuple[int, int, int, bool]]) -> None:
    """Put (token, position, sequence, wants its logits) items into llama.cpp's batch."""
    b.n_tokens = len(items)
    for j, (tok, pos, seq, want) in enumerate(items):
        b.token[j], b.pos[j], b.n_seq_id[j], b.logits[j] = tok, pos, 1, want
        b.seq_id[j][0] = seq


class CancelFlag(Protocol):
    """What eval and read look at between chunks: a threading.Event, or anything with is_set()."""

    def is_set(self) -> bool: ...


@dataclass(frozen=True)
class SavedSeq:
    """A sequence's KV cache copied out to memory, and the tokens it holds."""

    tokens: tuple[int, ...]
    data: mmap.mmap


def _load_model(path: Path, repack: bool) -> Any:
    mparams = llama_cpp.llama_model_default_params()
    mparams.use_extra_bufts = repack
    # Weights are read into memory, not mmapped: a model file truncated or rewritten in
    # place while serving would otherwise kill the server with SIGBUS.
    mparams.load_mode = llama_cpp.LLAMA_LOAD_MODE_NONE
    model = llama_cpp.llama_model_load_from_file(str(path).encode(), mparams)
    if not model:
        raise ModelError(f"llama.cpp could not load the model (truncated or corrupt?): {path}")
    return model


def _context_params(n_ctx: int, n_batch: int, n_ubatch: int, threads: int) -> Any:
    cparams = llama_cpp.llama_context_default_params()
    cparams.n_ctx = n_ctx
    cparams.n_batch = n_batch
    # The compute buffer is sized for n_ubatch rows: prompt speed barely depends on it
    # (bench-engine), memory does.
    cparams.n_ubatch = n_ubatch
    # Keys in q8_0 (values stay f16: quantized values need flash attention, see below):
    # less memory, decode as fast. Each key is quantized once, when
    # written, the same way whatever the batch, so KV reuse and batch invariance hold.
    cparams.type_k = llama_cpp.GGML_TYPE_Q8_0
    cparams.n_threads = threads
    cparams.n_threads_batch = threads
    # Flash attention (auto-on for CPU) gives a reused prefix logits that differ from a
    # fresh evaluation; the plain path is exact, so KV reuse is lossless.
    cparams.flash_attn_type = 0
    # One unified KV cache: a branch shares its source's cells (no copy), and the cells
    # hold the full prompt, the short one and the branches together.
    cparams.n_seq_max = MAX_SEQS
    cparams.kv_unified = True
    return cparams


class Engine(Vocab):
    """A loaded model with one context; not thread-safe: use it from one worker thread."""

    def __init__(self, path: str | Path, n_ctx: int = 4096, n_threads: int | None = None,
                 n_batch: int = 128, n_ubatch: int = 32, repack: bool = True) -> None:
        self.path = Path(path)
        check_gguf(self.path)
        # Extra buffer types hold weights in faster layouts (CPU_REPACK: Q4_0 for AVX2/AVX-512);
        # AMX, which crashed on one machine, is taken out of their list (cpu_buffers.py).
        self.buffer_types = extra_buffer_types() if repack else ()
        self._model = _load_model(self.path, repack)
        threads = n_threads or max(1, os.cpu_count() or 1)
        self._ctx = llama_cpp.llama_init_from_model(self._model, _context_params(n_ctx, n_batch, n_ubatch, threads))
        if not self._ctx:
            llama_cpp.llama_model_free(self._model)
            raise ModelError(f"could not create a context (n_ctx={n_ctx}) for {path}")
        Vocab.__init__(self, self._model)
        self._mem = llama_cpp.llama_get_memory(self._ctx)
        self.n_ctx = llama_cpp.llama_n_ctx(self._ctx)
        self.n_batch, self.n_ubatch, self.n_threads = n_batch, n_ubatch, threads
        self.threads_now = threads  # what decodes run on (use_threads), at most n_threads
        self._batch = llama_cpp.llama_batch_init(n_batch, 0, 1)
        self._read_abort = ReadAbort(self._ctx)  # a read stopped inside its decode (abort_read)
        self._seqs: dict[int, list[int]] = {FULL: []}  # tokens whose K/V each holds, in order
        self._kept: dict[int, Kept] = {}  # seq -> its last prefill's prompt and logits, and the rows after them
        self.decode_steps = 0  # llama_decode calls, ever: lets tests see work stop
        # Told of each prompt-shaped decode (16+ tokens, at most one logits row): (tokens, depth, ms).
        self.on_read: Callable[[int, int, float], None] | None = None

    def close(self) -> None:
        if getattr(self, "_ctx", None):
            llama_cpp.llama_batch_free(self._batch)
            llama_cpp.llama_free(self._ctx)
            llama_cpp.llama_model_free(self._model)
            self._ctx = None

    def __del__(self) -> None:
        self.close()

    def use_threads(self, n: int) -> None:
        """Decode on `n` threads (1..n_threads) from now on; the logits are the same."""
        n = max(1, min(n, self.n_threads))
        if n != self.threads_now:
            llama_cpp.llama_set_n_threads(self._ctx, n, n)
            self.threads_now = n

    @property
    def cached(self) -> list[int]:
        """The tokens the full prompt's sequence holds."""
        return self._seqs[FULL]

    def held(self, seq: int) -> list[int]:
        return self._seqs.setdefault(seq, [])

    def common_prefix(self, prompt: Sequence[int], seq: int = FULL) -> int:
        """How many leading tokens of `prompt` sequence `seq` already holds."""
        return common_prefix(self.held(seq), prompt)

    def _logits_row(self, i: int) -> np.ndarray:
        ptr = llama_cpp.llama_get_logits_ith(self._ctx, i)
        return np.ctypeslib.as_array(ptr, shape=(self.n_vocab,)).copy()

    def eval(self, tokens: Sequence[int], want_rows: Sequence[int] = (),
             cancel: CancelFlag | None = None, seq: int = FULL,
             chunk: int | None = None) -> list[np.ndarray]:
        """Append `tokens` after what `seq` holds; return logits for rows `want_rows`.
        `cancel` is checked between chunks (n_batch tokens, or `chunk`): what was evaluated
        stays cached for the next request, and Cancelled is raised."""
        held = self.held(seq)
        if len(held) + len(tokens) > self.n_ctx:
            raise ModelError(f"context full: {len(held)}+{len(tokens)} > n_ctx {self.n_ctx}")
        wanted = set(want_rows)
        rows: list[np.ndarray] = []
        step = min(chunk or self.n_batch, self.n_batch)
        for start in range(0, len(tokens), step):
            if cancel is not None and cancel.is_set():
                raise Cancelled(f"cancelled after {start} of {len(tokens)} prompt tokens")
            part, base = tokens[start:start + step], len(held)
            part_rows = [j for j in range(len(part)) if start + j in wanted]
            _fill_batch(self._batch, [(tok, base + j, seq, start + j in wanted) for j, tok in enumerate(part)])
            t0 = time.perf_counter()
            rc = llama_cpp.llama_decode(self._ctx, self._batch)
            self.decode_steps += 1
            if rc == 2:  # aborted by abort_read: llama.cpp dropped the unfinished ubatch
                now = llama_cpp.llama_memory_seq_pos_max(self._mem, seq) + 1
                del held[min(now, base):]
                held.extend(part[:max(0, now - base)])
                raise Cancelled(f"stopped within {len(part)} tokens after {base} prompt tokens")
            if rc != 0:
                self.drop(seq)
                raise ModelError(f"llama_decode failed with code {rc}")
            if self.on_read is not None and len(part) >= 16 and len(part_rows) <= 1:
                self.on_read(len(part), base, (time.perf_counter() - t0) * 1000)
            held.extend(part)
            rows.extend(self._logits_row(j) for j in part_rows)
        return rows

    def eval_seqs(self, items: Sequence[tuple[int, int, int]]) -> list[np.ndarray]:
        """One llama_decode of (token, position, sequence) items, a logits row each: several
        branches advance by one token for the price of one batch."""
        _fill_batch(self._batch, [(tok, pos, seq, True) for tok, pos, seq in items])
        rc = llama_cpp.llama_decode(self._ctx, self._batch)
        self.decode_steps += 1
        if rc != 0:
            raise ModelError(f"llama_decode failed with code {rc}")
        return [self._logits_row(j) for j in range(len(items))]

    def branch_seq(self, seq: int, n_tokens: int, source: int = FULL) -> None:
        """Sequence `seq` starts as the first n_tokens of `source` (cells shared, not copied)."""
        if not FIRST_BRANCH <= seq < MAX_SEQS:
            raise ValueError(f"sequence {seq} outside {FIRST_BRANCH}..{MAX_SEQS - 1}")
        llama_cpp.llama_memory_seq_rm(self._mem, seq, -1, -1)
        llama_cpp.llama_memory_seq_cp(self._mem, source, seq, 0, n_tokens)

    def truncate(self, n_keep: int, seq: int = FULL) -> None:
        """Drop cached tokens of `seq` from position n_keep on (rollback)."""
        held = self.held(seq)
        if n_keep < len(held):
            llama_cpp.llama_memory_seq_rm(self._mem, seq, n_keep, -1)
            del held[n_keep:]
            if (kept := self._kept.get(seq)) is not None and not kept.cut(n_keep):
                del self._kept[seq]

    def make_room(self, seq: int, n_tokens: int) -> None:
        """Let `seq` grow to `n_tokens` in the shared cells: short prompts of other places
        are dropped while it would not fit beside what every sequence holds."""
        for other in range(SHORT, SHORT + SHORT_SEQS):
            if sum(len(h) for s, h in self._seqs.items() if s != seq) + n_tokens <= self.n_ctx:
                return
            if other != seq:
                self.drop(other)

    def drop(self, seq: int) -> None:
        """Drop everything sequence `seq` holds."""
        llama_cpp.llama_memory_seq_rm(self._mem, seq, -1, -1)
        self._seqs.pop(seq, None)
        self._kept.pop(seq, None)

    def reset(self) -> None:
        """Drop every sequence."""
        llama_cpp.llama_memory_clear(self._mem, True)
        for held in self._seqs.values():
            held.clear()
        self._kept.clear()

    def saved_size(self, seq: int = FULL) -> int:
        """Bytes a save of `seq` takes."""
        return llama_cpp.llama_state_seq_get_size(self._ctx, seq)

    def save_seq(self, seq: int = FULL) -> SavedSeq:
        """Copy the sequence's KV cache out (a few ms for a thousand tokens), written in place
        (no second copy to double the peak) into pages that go back to the system when the copy
        is dropped (from the heap, freed megabytes stay)."""
        size = self.saved_size(seq)
        data = mmap.mmap(-1, size)
        n = llama_cpp.llama_state_seq_get_data(self._ctx, (ctypes.c_uint8 * size).from_buffer(data), size, seq)
        if n != size:
            raise ModelError(f"could not save a KV cache ({n} of {size} bytes)")
        return SavedSeq(tuple(self.held(seq)), data)

    def load_seq(self, saved: SavedSeq, seq: int = FULL) -> None:
        """Make `seq` hold a saved cache again (its old content is dropped)."""
        self.drop(seq)
        self.make_room(seq, len(saved.tokens))
        data = (ctypes.c_uint8 * len(saved.data)).from_buffer(saved.data)  # read in place, not copied
        if llama_cpp.llama_state_seq_set_data(self._ctx, data, len(saved.data), seq) == 0:
            raise ModelError("could not load a saved KV cache back (no room in the context)")
        self.held(seq).extend(saved.tokens)

    def prefill(self, prompt: Sequence[int], cancel: threading.Event | None = None,
                seq: int = FULL, keep_after: bool = False) -> tuple[np.ndarray, int]:
        """Make `seq` hold `prompt`; return the last token's logits and tokens reused. With
        `keep_after`, what the last generation from the same prompt left is kept (`after`)."""
        if not prompt:
            raise ValueError("empty prompt")
        prompt = list(prompt)
        held = self.common_prefix(prompt, seq)
        kept = self._kept.get(seq)
        if held == len(prompt) and kept is not None and kept.prompt == prompt:
            # The same prompt again (keystrokes within a word, where healing keeps the prompt):
            # its logits are kept, and the sequence still holds every token they came from.
            self.truncate(held + len(kept.tokens) if keep_after else held, seq)
            return kept.logits.copy(), held
        # Re-evaluate at least one token, for its logits.
        common = min(held, len(prompt) - 1)
        self.truncate(common, seq)
        rest = prompt[common:]
        (logits,) = self.eval(rest, want_rows=[len(rest) - 1], cancel=cancel, seq=seq)
        self._kept[seq] = Kept(prompt, logits.copy(), max(8, KEPT_ROW_BYTES // (4 * self.n_vocab)))
        return logits, common

    def after(self, seq: int = FULL) -> tuple[list[int], list[np.ndarray]]:
        """The generated tokens `seq` holds after its last prefill's prompt, with the logits
        row after each (kept by `keep`)."""
        kept = self._kept.get(seq)
        return (list(kept.tokens), list(kept.rows)) if kept is not None else ([], [])

    def keep(self, tokens: Sequence[int], rows: Sequence[np.ndarray], seq: int = FULL) -> None:
        """`tokens` were just generated onto `seq` after the last prefill's prompt and what is
        kept: keep them and the row after each, for the next generation from that prompt."""
        if (kept := self._kept.get(seq)) is not None:
            kept.add(self.held(seq), tokens, rows)

    def read(self, prompt: Sequence[int], cancel: CancelFlag, seq: int = FULL, chunk: int = 64) -> int:
        """Read `prompt` into `seq` without logits, `chunk` tokens a decode, stopping (with
        Cancelled, progress kept) at the first chunk after `cancel` is set, or inside the
        decode on abort_read; the tokens read."""
        common = self.common_prefix(prompt, seq)
        self.truncate(common, seq)
        rest = list(prompt[common:-1])  # the last token is read by the request, for its logits
        # `cancel` is looked at before each chunk, so an abort_read that came before the flag
        # was armed is not lost.
        with self._read_abort.armed():
            self.eval(rest, cancel=cancel, seq=seq, chunk=chunk)
        return len(rest)

    def abort_read(self) -> None:
        """Stop a running `read` now, inside its decode (from any thread; no-op otherwise).
        The caller also sets the read's `cancel`, which the read sees between chunks."""
        self._read_abort.abort()


def common_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    n, limit = 0, min(len(a), len(b))
    while n < limit and a[n] == b[n]:
        n += 1
    return n
