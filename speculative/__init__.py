"""Decoding engine: one long-lived llama.cpp context per model, KV prefix reuse."""

from speculative.decode import GenerationResult
from speculative.engine import Engine
from speculative.errors import Cancelled, ModelError
from speculative.model_file import resolve_model_path

__all__ = ["Cancelled", "Engine", "GenerationResult", "ModelError", "resolve_model_path"]
