"""Models for the regime of a user's own, heavier model, built from GGUFs at hand (no weights
of real code models can be fetched here): bench tooling, never loaded by the runtime.

- `twin:N` — the embedded model's twin at N times its weight bytes, as llama.cpp's `deci`
  architecture (per-layer head and FFN sizes): after its first layer (llama.cpp takes the head
  size from the first), attention-free layers whose FFN down-projection is all zeros, then the
  rest. Each extra layer adds `x + 0 = x`, so the logits are the original's bit for bit while
  every extra FFN is computed: latency is all that changes.
- `trunc:K` — the first K of the embedded model's layers, then its output norm and head: a
  draft whose acceptance is far from 1, at K/30 of its layers' cost.
- `skip:A-B` — the embedded model without its layers A..B: a draft that agrees with it as
  often as real pairs of one family do, for the layers skipped.
- `shape:qwen2.5-coder-0.5b`, `shape:qwen2.5-coder-1.5b` — random Q4_0 weights in those
  models' real shapes on llama.cpp's Qwen2 vocabulary (`make vocabs`), for costs only.

Built once into the cache folder (`specfill regime build`); benches take them by name.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Collection
from dataclasses import dataclass
from pathlib import Path

import gguf
import numpy as np

from speculative.cost_model import cache_dir
from speculative.model_file import resolve_model_path

Q4_0 = gguf.GGMLQuantizationType.Q4_0
BLOCK, BLOCK_BYTES = 32, 18  # Q4_0: 32 weights in an f16 scale and 16 bytes of nibbles
TWIN_FF_FACTOR = 4  # an extra layer's FFN is this many times the original's width
VOCABS = Path(__file__).parents[1] / ".tools" / "vocab"


@dataclass(frozen=True)
class Shape:
    arch: str
    n_embd: int
    n_layer: int
    n_head: int
    n_head_kv: int
    n_ff: int
    vocab: str  # the vocab-only GGUF the shape takes its tokenizer from
    qkv_bias: bool = True


SHAPES = {  # from the models' config.json (tied embeddings in both)
    "qwen2.5-coder-0.5b": Shape("qwen2", 896, 24, 14, 2, 4864, "qwen2"),
    "qwen2.5-coder-1.5b": Shape("qwen2", 1536, 28, 12, 2, 8960, "qwen2"),
}


def regime_dir() -> Path:
    return cache_dir() / "regime"


def resolve(name: str | None) -> Path:
    """A bench's --model/--draft-model: `twin:N`, `trunc:K`, `skip:A-B`, `shape:NAME` (built on first use),
    else a path or packaged name as the server takes it."""
    kind, _, arg = (name or "").partition(":")
    if kind == "twin" and arg:
        return twin(float(arg))
    if kind == "trunc" and arg:
        return truncated(int(arg))
    if kind == "skip" and arg:
        first, _, last = arg.partition("-")
        return skipped(int(first), int(last or first))
    if kind == "shape" and arg in SHAPES:
        return random_shape(arg)
    return resolve_model_path(name)


def _source() -> Path:
    from speculative.convert import weights_path

    return weights_path(resolve_model_path(None))  # the Q4_0 file the server loads


def _copy_fields(reader: gguf.GGUFReader, writer: gguf.GGUFWriter, rename: dict[str, str],
                 skip: Collection[str] = ()) -> None:
    """Every key-value of `reader` but the architecture (the writer's own), keys renamed by
    prefix (`llama.` -> `deci.`)."""
    for field in reader.fields.values():
        if field.name.startswith("GGUF.") or field.name == "general.architecture" or field.name in skip:
            continue
        key = field.name
        for old, new in rename.items():
            if key.startswith(old):
                key = new + key[len(old):]
        if key in skip:
            continue
        vtype = field.types[0]
        sub = field.types[-1] if vtype == gguf.GGUFValueType.ARRAY else None
        writer.add_key_value(key, field.contents(), vtype, sub_type=sub)


def _copy_tensor(writer: gguf.GGUFWriter, t: gguf.ReaderTensor, name: str | None = None) -> None:
    writer.add_tensor(name or t.name, np.asarray(t.data), raw_dtype=t.tensor_type)


def _q4_0(rows: int, cols: int, scale: float, rng: np.random.Generator | None) -> np.ndarray:
    """A Q4_0 matrix of `rows` rows of `cols` weights, as bytes: random nibbles under one
    scale, or all zeros (scale 0) without `rng`."""
    data = np.zeros((rows, cols // BLOCK, BLOCK_BYTES), dtype=np.uint8)
    if rng is not None:
        data[..., :2] = np.frombuffer(np.float16(scale).tobytes(), dtype=np.uint8)
        data[..., 2:] = rng.integers(0, 256, size=(rows, cols // BLOCK, BLOCK_BYTES - 2), dtype=np.uint8)
    return data.reshape(rows, -1)


def _finish(writer: gguf.GGUFWriter, out: Path) -> Path:
    tmp = out.with_name(f".{out.name}.tmp")
    writer.write_header_to_file(tmp)
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    tmp.replace(out)
    return out


def _paths(source: Path | None, tag: str) -> tuple[Path, Path]:
    """The source (default: the embedded model as the server loads it) and where its `tag`
    variant is cached."""
    source = source or _source()
    out = regime_dir() / f"{source.stem}.{tag}.gguf"
    out.parent.mkdir(parents=True, exist_ok=True)
    return source, out


def _get(reader: gguf.GGUFReader, key: str) -> int:
    return int(reader.fields[key].contents())


def twin(factor: float, source: Path | None = None) -> Path:
    """The source (a llama-architecture GGUF) with attention-free, zero-output FFN layers after
    its first, to `factor` times its weight bytes."""
    source, out = _paths(source, f"twin{factor:g}")
    if out.exists():
        return out
    reader = gguf.GGUFReader(source)
    n_layer, n_embd = _get(reader, "llama.block_count"), _get(reader, "llama.embedding_length")
    n_ff, n_head, n_kv = (_get(reader, f"llama.{k}") for k in
                          ("feed_forward_length", "attention.head_count", "attention.head_count_kv"))
    width = TWIN_FF_FACTOR * n_ff
    layer_bytes = 3 * n_embd * width // BLOCK * BLOCK_BYTES
    total = sum(int(t.n_bytes) for t in reader.tensors)
    extra = max(0, round((factor - 1) * total / layer_bytes))
    writer = gguf.GGUFWriter(None, "deci")
    per_layer = {"deci.block_count", "deci.feed_forward_length", "deci.attention.head_count",
                 "deci.attention.head_count_kv"}
    _copy_fields(reader, writer, {"llama.": "deci."}, skip=per_layer)
    writer.add_uint32("deci.block_count", extra + n_layer)
    writer.add_array("deci.feed_forward_length", [n_ff] + [width] * extra + [n_ff] * (n_layer - 1))
    writer.add_array("deci.attention.head_count", [n_head] + [0] * extra + [n_head] * (n_layer - 1))
    writer.add_array("deci.attention.head_count_kv", [n_kv] + [0] * extra + [n_kv] * (n_layer - 1))
    rng = np.random.default_rng(0)
    for i in range(1, extra + 1):
        writer.add_tensor(f"blk.{i}.ffn_norm.weight", np.ones(n_embd, dtype=np.float32))
        writer.add_tensor(f"blk.{i}.ffn_gate.weight", _q4_0(width, n_embd, 0.02, rng), raw_dtype=Q4_0)
        writer.add_tensor(f"blk.{i}.ffn_up.weight", _q4_0(width, n_embd, 0.02, rng), raw_dtype=Q4_0)
        writer.add_tensor(f"blk.{i}.ffn_down.weight", _q4_0(n_embd, width, 0.0, None), raw_dtype=Q4_0)
    for t in reader.tensors:
        parts = t.name.split(".")
        if parts[0] == "blk" and int(parts[1]) > 0:
            parts[1] = str(int(parts[1]) + extra)
        _copy_tensor(writer, t, ".".join(parts))
    return _finish(writer, out)


def truncated(keep: int, source: Path | None = None) -> Path:
    """The source's first `keep` layers, then its output norm and head."""
    return _layers(lambda i: i < keep, keep - 1, f"trunc{keep}", f"trunc:{keep}", source)


def skipped(first: int, last: int, source: Path | None = None) -> Path:
    """The source without its layers first..last (inclusive), the rest renumbered: a draft
    that stays close to the source, as layer-skipping self-speculation drafts."""
    return _layers(lambda i: not first <= i <= last, last, f"skip{first}-{last}", f"skip:{first}-{last}", source)


def _layers(keep: Callable[[int], bool], last_named: int, tag: str, name: str, source: Path | None) -> Path:
    """The source with the layers `keep(i)` selects, in order, and every other tensor; the
    name's layers (up to `last_named`) must be the model's."""
    source, out = _paths(source, tag)
    if out.exists():
        return out
    reader = gguf.GGUFReader(source)
    arch = str(reader.fields["general.architecture"].contents())
    n = _get(reader, f"{arch}.block_count")
    new_index: dict[int, int] = {}
    for i in range(n):
        if keep(i):
            new_index[i] = len(new_index)
    if not 0 <= last_named < n or not new_index:
        raise ValueError(f"{name}: the model has {n} layers")
    writer = gguf.GGUFWriter(None, arch)
    _copy_fields(reader, writer, {}, skip={f"{arch}.block_count"})
    writer.add_uint32(f"{arch}.block_count", len(new_index))
    for t in reader.tensors:
        parts = t.name.split(".")
        if parts[0] != "blk":
            _copy_tensor(writer, t)
        elif int(parts[1]) in new_index:
            _copy_tensor(writer, t, ".".join([parts[0], str(new_index[int(parts[1])]), *parts[2:]]))
    return _finish(writer, out)


def random_shape(name: str) -> Path:
    """Random Q4_0 weights in a real model's shape, on its family's vocab-only GGUF."""
    s = SHAPES[name]
    out = regime_dir() / f"shape-{name}.gguf"
    if out.exists():
        return out
    vocab_file = VOCABS / f"ggml-vocab-{s.vocab}.gguf"
    if not vocab_file.exists():
        raise FileNotFoundError(f"{vocab_file}: run `make vocabs`")
    out.parent.mkdir(parents=True, exist_ok=True)
    reader = gguf.GGUFReader(vocab_file)
    n_vocab = len(reader.fields["tokenizer.ggml.tokens"].data)
    writer = gguf.GGUFWriter(None, s.arch)
    _copy_fields(reader, writer, {}, skip={k for k in reader.fields if k.startswith(f"{s.arch}.")})
    kv = s.n_embd // s.n_head * s.n_head_kv  # K and V widths
    for key, value in (("block_count", s.n_layer), ("context_length", 32768), ("embedding_length", s.n_embd),
                       ("feed_forward_length", s.n_ff), ("attention.head_count", s.n_head),
                       ("attention.head_count_kv", s.n_head_kv)):
        writer.add_uint32(f"{s.arch}.{key}", value)
    writer.add_float32(f"{s.arch}.rope.freq_base", 1000000.0)
    writer.add_float32(f"{s.arch}.attention.layer_norm_rms_epsilon", 1e-6)
    writer.add_uint32("general.file_type", int(gguf.LlamaFileType.MOSTLY_Q4_0))
    rng = np.random.default_rng(0)
    scale = 0.02
    writer.add_tensor("token_embd.weight", _q4_0(n_vocab, s.n_embd, scale, rng), raw_dtype=Q4_0)
    writer.add_tensor("output_norm.weight", np.ones(s.n_embd, dtype=np.float32))
    for i in range(s.n_layer):
        b = f"blk.{i}."
        writer.add_tensor(b + "attn_norm.weight", np.ones(s.n_embd, dtype=np.float32))
        writer.add_tensor(b + "ffn_norm.weight", np.ones(s.n_embd, dtype=np.float32))
        for name_, rows, cols in (("attn_q", s.n_embd, s.n_embd), ("attn_k", kv, s.n_embd), ("attn_v", kv, s.n_embd),
                                  ("attn_output", s.n_embd, s.n_embd), ("ffn_gate", s.n_ff, s.n_embd),
                                  ("ffn_up", s.n_ff, s.n_embd), ("ffn_down", s.n_embd, s.n_ff)):
            writer.add_tensor(b + name_ + ".weight", _q4_0(rows, cols, scale, rng), raw_dtype=Q4_0)
        if s.qkv_bias:
            for name_, n in (("attn_q", s.n_embd), ("attn_k", kv), ("attn_v", kv)):
                writer.add_tensor(b + name_ + ".bias", np.zeros(n, dtype=np.float32))
    return _finish(writer, out)


def main(names: list[str]) -> int:
    for name in names:
        try:
            path = resolve(name)
        except (ValueError, FileNotFoundError) as exc:
            print(f"specfill: {exc}", file=sys.stderr)
            return 2
        print(f"{name}: {path} ({path.stat().st_size / 2**20:.0f} MiB)")
    return 0
