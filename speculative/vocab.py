"""A model's vocabulary: tokenizing, token bytes, special tokens, GGUF metadata.

The Engine is a Vocab with a context; `Vocab.load` reads a GGUF's vocabulary alone (no
weights), as prompt families and token healing are tested on the vocab-only files that
llama.cpp's sources carry for many tokenizers.
"""

from __future__ import annotations

import ctypes
import functools
from collections.abc import Sequence
from pathlib import Path

import llama_cpp

from speculative.errors import ModelError

# Texts this long are tokenized once while they stay the same: the text after the cursor and
# other files' text are tokenized again at every keystroke, for the prompt and prompt lookup.
MEMO_CHARS = 512
MEMO_TEXTS = 32


class Vocab:
    path: Path  # the GGUF file (set by load, and by Engine)

    def __init__(self, model) -> None:
        self._vocab = llama_cpp.llama_model_get_vocab(model)
        self._meta_model = model
        self.n_vocab = llama_cpp.llama_vocab_n_tokens(self._vocab)
        self._pieces: list[bytes] | None = None
        self._owned = None  # the model, when this vocabulary loaded it alone (load)
        self._memo = functools.lru_cache(maxsize=MEMO_TEXTS)(self._tokenize)

    @classmethod
    def load(cls, path: str | Path) -> Vocab:
        """The vocabulary of a GGUF file, without its weights (free it with close())."""
        params = llama_cpp.llama_model_default_params()
        params.vocab_only = True
        model = llama_cpp.llama_model_load_from_file(str(path).encode(), params)
        if not model:
            raise ModelError(f"llama.cpp could not read the vocabulary of {path}")
        vocab = cls(model)
        vocab._owned = model
        vocab.path = Path(path)  # what errors name, as an Engine's
        return vocab

    def close(self) -> None:
        if getattr(self, "_owned", None):
            llama_cpp.llama_model_free(self._owned)
            self._owned = None

    def tokenize(self, text: str, add_special: bool = False, parse_special: bool = True) -> list[int]:
        if len(text) >= MEMO_CHARS:
            return list(self._memo(text, add_special, parse_special))
        return list(self._tokenize(text, add_special, parse_special))

    def _tokenize(self, text: str, add_special: bool, parse_special: bool) -> tuple[int, ...]:
        data = text.encode("utf-8", errors="surrogatepass")
        cap = len(data) + 16
        buf = (llama_cpp.llama_token * cap)()
        n = llama_cpp.llama_tokenize(self._vocab, data, len(data), buf, cap, add_special, parse_special)
        if n < 0:
            cap = -n
            buf = (llama_cpp.llama_token * cap)()
            n = llama_cpp.llama_tokenize(self._vocab, data, len(data), buf, cap, add_special, parse_special)
        return tuple(buf[:n])

    def token_bytes(self, token: int) -> bytes:
        if self._pieces is not None:
            return self._pieces[token]
        buf = ctypes.create_string_buffer(64)
        n = llama_cpp.llama_token_to_piece(self._vocab, token, buf, len(buf), 0, False)
        if n < 0:
            buf = ctypes.create_string_buffer(-n)
            n = llama_cpp.llama_token_to_piece(self._vocab, token, buf, len(buf), 0, False)
        return buf.raw[:n]

    def pieces(self) -> list[bytes]:
        """Every token's bytes, by id (control tokens are empty), read once."""
        if self._pieces is None:
            self._pieces = [self.token_bytes(t) for t in range(self.n_vocab)]
        return self._pieces

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
        n = llama_cpp.llama_model_meta_val_str(self._meta_model, key.encode(), buf, len(buf))
        return buf.value.decode(errors="replace") if n >= 0 else None

