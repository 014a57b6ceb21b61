"""The decode loop with options by name, for tests: `speculative.decode.generate` takes its
options typed (`Decoding`, `Aids`); tests name a few of them at a time."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from speculative.decode import Aids, Decoding, GenerationResult, TokenTrace, generate

AIDS = frozenset(f.name for f in dataclasses.fields(Aids))


def decode(engine, prompt: Sequence[int], *, trace: bool = False, **options) -> GenerationResult:
    """`generate` with `options` split into Decoding's and Aids' fields; `trace` keeps each
    token's argmax and top-2 gap."""
    aids = {k: options.pop(k) for k in list(options) if k in AIDS}
    if trace:
        aids["tracer"] = TokenTrace()
    return generate(engine, prompt, Decoding(**options), Aids(**aids))
