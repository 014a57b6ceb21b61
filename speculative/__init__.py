"""Decoding engine: one long-lived llama.cpp context per model, KV prefix reuse."""

from speculative.engine import Engine, GenerationResult
from speculative.model_file import ModelError, resolve_model_path

__all__ = ["Engine", "GenerationResult", "ModelError", "resolve_model_path"]
