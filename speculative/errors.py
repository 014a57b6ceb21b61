"""The engine's exceptions, in one place."""


class ModelError(Exception):
    """A model file that cannot be used, or a context that failed; the message says which and why."""


class Cancelled(Exception):
    """Work stopped by its cancel flag; what a prefill already evaluated stays in the cache."""
