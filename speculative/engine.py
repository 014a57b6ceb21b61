"""Plain greedy decoding on llama.cpp's low-level API with KV prefix reuse.

One Engine owns one model and one long-lived context. A request evaluates only the
tokens after the longest common prefix with what sequence 0 of the KV cache holds,
and asks llama.cpp for logits only on the rows it reads (no logits_all buffer).
"""

from __future__ import annotations

import ctypes
import os
import threading
from collections.abc import Sequence
from pathlib import Path

import llama_cpp
import numpy as np

from speculative.decode import Cancelled, GenerationResult, generate
from speculative.model_file import ModelError, check_gguf

SEQ = 0
MAX_SEQS = 8  # sequence 0 plus branches for candidates, sharing the prompt's KV cells


@llama_cpp.llama_log_callback
def _quiet_log(level, text, user_data):
    # llama.cpp logs every load to stderr; the server's stderr is the editor's log.
    if os.environ.get("SPECFILL_LLAMA_LOG"):
        os.write(2, text)


llama_cpp.llama_log_set(_quiet_log, ctypes.c_void_p(0))
llama_cpp.llama_backend_init()


class Engine:
    """A loaded model with one context; not thread-safe: use it from one worker thread."""

    def __init__(self, path: str | Path, n_ctx: int = 4096, n_threads: int | None = None,
                 n_batch: int = 128, n_ubatch: int = 32) -> None:
        self.path = Path(path)
        check_gguf(self.path)
        mparams = llama_cpp.llama_model_default_params()
        # The AMX extra buffer type crashes in ggml_backend_amx_mul_mat on these CPUs
        # (seen here: SIGSEGV on the first decode); plain CPU buffers are safe.
        mparams.use_extra_bufts = False
        # Weights are read into memory, not mmapped: a model file truncated or rewritten in
        # place while serving would otherwise kill the server with SIGBUS (seen here).
        mparams.load_mode = llama_cpp.LLAMA_LOAD_MODE_NONE
        self._model = llama_cpp.llama_model_load_from_file(str(self.path).encode(), mparams)
        if not self._model:
            raise ModelError(f"llama.cpp could not load the model (truncated or corrupt?): {path}")
        threads = n_threads or max(1, os.cpu_count() or 1)
        cparams = llama_cpp.llama_context_default_params()
        cparams.n_ctx = n_ctx
        cparams.n_batch = n_batch
        # The compute buffer is sized for n_ubatch rows: 99 MB at 512 for SmolLM2, 25 MB at 128.
        # 32 (the longest verify batch) keeps peak RSS within model + 150 MB at n_ctx 4096
        # (236 MB against 248 at 64); the price is a cold prefill ~7% slower (1,000 tokens:
        # 4.07 s against 3.81 s). Warm requests read a few tokens and do not feel it.
        cparams.n_ubatch = n_ubatch
        # Keys in q8_0 (values stay f16: quantized values need flash attention, see below):
        # 21 MB less at n_ctx 4096 for SmolLM2, decode as fast. Each key is quantized once, when
        # written, the same way whatever the batch, so KV reuse and batch invariance hold.
        cparams.type_k = llama_cpp.GGML_TYPE_Q8_0
        cparams.n_threads = threads
        cparams.n_threads_batch = threads
        # Flash attention (auto-on for CPU) gives a reused prefix logits up to 0.85 off a
        # fresh evaluation here; the plain path is exact (max diff 0.0), so KV reuse is lossless.
        cparams.flash_attn_type = 0
        # Candidates branch from the prompt on sequences 1.. that share its cells (unified KV:
        # no extra memory per sequence).
        cparams.n_seq_max = MAX_SEQS
        cparams.kv_unified = True
        self._ctx = llama_cpp.llama_init_from_model(self._model, cparams)
        if not self._ctx:
            llama_cpp.llama_model_free(self._model)
            raise ModelError(f"could not create a context (n_ctx={n_ctx}) for {path}")
        self._vocab = llama_cpp.llama_model_get_vocab(self._model)
        self._mem = llama_cpp.llama_get_memory(self._ctx)
        self.n_vocab = llama_cpp.llama_vocab_n_tokens(self._vocab)
        self.n_ctx = llama_cpp.llama_n_ctx(self._ctx)
        self.n_batch = n_batch
        self.n_threads = threads
        self._batch = llama_cpp.llama_batch_init(n_batch, 0, 1)
        self.cached: list[int] = []  # tokens whose K/V sit in sequence 0, in order
        self.decode_steps = 0  # llama_decode calls, ever: lets tests see work stop

    def close(self) -> None:
        if getattr(self, "_ctx", None):
            llama_cpp.llama_batch_free(self._batch)
            llama_cpp.llama_free(self._ctx)
            llama_cpp.llama_model_free(self._model)
            self._ctx = None

    def __del__(self) -> None:
        self.close()

    # -- vocabulary ---------------------------------------------------------------
    def tokenize(self, text: str, add_special: bool = False, parse_special: bool = True) -> list[int]:
        data = text.encode("utf-8", errors="surrogatepass")
        cap = len(data) + 16
        buf = (llama_cpp.llama_token * cap)()
        n = llama_cpp.llama_tokenize(self._vocab, data, len(data), buf, cap, add_special, parse_special)
        if n < 0:
            cap = -n
            buf = (llama_cpp.llama_token * cap)()
            n = llama_cpp.llama_tokenize(self._vocab, data, len(data), buf, cap, add_special, parse_special)
        return list(buf[:n])

    def token_bytes(self, token: int) -> bytes:
        buf = ctypes.create_string_buffer(64)
        n = llama_cpp.llama_token_to_piece(self._vocab, token, buf, len(buf), 0, False)
        if n < 0:
            buf = ctypes.create_string_buffer(-n)
            n = llama_cpp.llama_token_to_piece(self._vocab, token, buf, len(buf), 0, False)
        return buf.raw[:n]

    def detokenize(self, tokens: Sequence[int]) -> str:
        return b"".join(self.token_bytes(t) for t in tokens).decode("utf-8", errors="replace")

    def is_eog(self, token: int) -> bool:
        return bool(llama_cpp.llama_vocab_is_eog(self._vocab, token))

    def special_token(self, text: str) -> int | None:
        """The id of a special token spelled exactly `text`, if the vocabulary has one."""
        ids = self.tokenize(text, parse_special=True)
        # Special iff it is one token when parsed as special and several when spelled out.
        return ids[0] if len(ids) == 1 and len(self.tokenize(text, parse_special=False)) > 1 else None

    def special_ids(self) -> dict[str, int]:
        """Ids of the vocabulary's named special tokens (bos, eos, eot, fim_*), where set."""
        v, lc = self._vocab, llama_cpp
        named = {"bos": lc.llama_vocab_bos(v), "eos": lc.llama_vocab_eos(v), "eot": lc.llama_vocab_eot(v),
                 "fim_pre": lc.llama_vocab_fim_pre(v), "fim_suf": lc.llama_vocab_fim_suf(v),
                 "fim_mid": lc.llama_vocab_fim_mid(v)}
        return {k: int(t) for k, t in named.items() if 0 <= t < self.n_vocab}

    def bos_for_prompt(self) -> int | None:
        """The BOS id when the model expects prompts to start with it (GGUF add_bos_token)."""
        if not llama_cpp.llama_vocab_get_add_bos(self._vocab):
            return None
        bos = llama_cpp.llama_vocab_bos(self._vocab)
        return int(bos) if 0 <= bos < self.n_vocab else None

    def token_text(self, token: int) -> str:
        """A token's text as the vocabulary spells it (special tokens included)."""
        return llama_cpp.llama_vocab_get_text(self._vocab, token).decode("utf-8", errors="replace")

    def prompt_special_id(self, text: str) -> int | None:
        """The id of a prompt's special token: by exact text, else a FIM token of that text
        (CodeLlama's vocabulary spells `<PRE>` as `▁<PRE>`)."""
        tid = self.special_token(text)
        if tid is not None:
            return tid
        for name, t in self.special_ids().items():
            if name.startswith("fim_") and self.token_text(t).replace("▁", " ").strip() == text:
                return t
        return None

    def metadata(self, key: str) -> str | None:
        buf = ctypes.create_string_buffer(256)
        n = llama_cpp.llama_model_meta_val_str(self._model, key.encode(), buf, len(buf))
        return buf.value.decode(errors="replace") if n >= 0 else None

    # -- evaluation ---------------------------------------------------------------
    def _logits_row(self, i: int) -> np.ndarray:
        ptr = llama_cpp.llama_get_logits_ith(self._ctx, i)
        return np.ctypeslib.as_array(ptr, shape=(self.n_vocab,)).copy()

    def eval(self, tokens: Sequence[int], want_rows: Sequence[int] = (),
             cancel: threading.Event | None = None) -> list[np.ndarray]:
        """Append `tokens` after what the cache holds; return logits for rows `want_rows`.
        `cancel` is checked between chunks: what was evaluated stays cached for the next request."""
        if len(self.cached) + len(tokens) > self.n_ctx:
            raise ModelError(f"context full: {len(self.cached)}+{len(tokens)} > n_ctx {self.n_ctx}")
        wanted = set(want_rows)
        rows: list[np.ndarray] = []
        for start in range(0, len(tokens), self.n_batch):
            if cancel is not None and cancel.is_set():
                raise Cancelled(f"cancelled after {start} of {len(tokens)} prompt tokens")
            chunk = tokens[start:start + self.n_batch]
            b = self._batch
            b.n_tokens = len(chunk)
            base = len(self.cached)
            chunk_rows = []
            for j, tok in enumerate(chunk):
                b.token[j] = tok
                b.pos[j] = base + j
                b.n_seq_id[j] = 1
                b.seq_id[j][0] = SEQ
                want = (start + j) in wanted
                b.logits[j] = want
                if want:
                    chunk_rows.append(j)
            rc = llama_cpp.llama_decode(self._ctx, b)
            self.decode_steps += 1
            if rc != 0:
                self.reset()
                raise ModelError(f"llama_decode failed with code {rc}")
            self.cached.extend(chunk)
            rows.extend(self._logits_row(j) for j in chunk_rows)
        return rows

    def eval_seqs(self, items: Sequence[tuple[int, int, int]]) -> list[np.ndarray]:
        """One llama_decode of (token, position, sequence) items, a logits row each: several
        branches advance by one token for the price of one batch."""
        b = self._batch
        b.n_tokens = len(items)
        for j, (tok, pos, seq) in enumerate(items):
            b.token[j], b.pos[j], b.n_seq_id[j], b.logits[j] = tok, pos, 1, True
            b.seq_id[j][0] = seq
        rc = llama_cpp.llama_decode(self._ctx, b)
        self.decode_steps += 1
        if rc != 0:
            raise ModelError(f"llama_decode failed with code {rc}")
        return [self._logits_row(j) for j in range(len(items))]

    def branch_seq(self, seq: int, n_tokens: int) -> None:
        """Sequence `seq` starts as the first n_tokens of sequence 0 (cells shared, not copied)."""
        if not 0 < seq < MAX_SEQS:
            raise ValueError(f"sequence {seq} outside 1..{MAX_SEQS - 1}")
        llama_cpp.llama_memory_seq_rm(self._mem, seq, -1, -1)
        llama_cpp.llama_memory_seq_cp(self._mem, SEQ, seq, 0, n_tokens)

    def drop_seq(self, seq: int) -> None:
        llama_cpp.llama_memory_seq_rm(self._mem, seq, -1, -1)

    def truncate(self, n_keep: int) -> None:
        """Forget cached tokens from position n_keep on (rollback)."""
        if n_keep < len(self.cached):
            llama_cpp.llama_memory_seq_rm(self._mem, SEQ, n_keep, -1)
            del self.cached[n_keep:]

    def reset(self) -> None:
        llama_cpp.llama_memory_clear(self._mem, True)
        self.cached.clear()

    def prefill(self, prompt: Sequence[int], cancel: threading.Event | None = None) -> tuple[np.ndarray, int]:
        """Make the cache hold `prompt`; return the last token's logits and tokens reused."""
        if not prompt:
            raise ValueError("empty prompt")
        common = 0
        limit = min(len(self.cached), len(prompt) - 1)  # re-evaluate >= 1 token for its logits
        while common < limit and self.cached[common] == prompt[common]:
            common += 1
        self.truncate(common)
        rest = list(prompt[common:])
        (logits,) = self.eval(rest, want_rows=[len(rest) - 1], cancel=cancel)
        return logits, common

    # -- generation ---------------------------------------------------------------
    def generate(self, prompt: Sequence[int], **kwargs) -> GenerationResult:
        """Generate from `prompt`; see speculative.decode.generate for the options."""
        return generate(self, prompt, **kwargs)
