"""Model work on the server's own single thread, never on pygls's pool."""

from __future__ import annotations

import threading
from concurrent.futures import Future, ThreadPoolExecutor

from lsp_server.settings import Settings
from prompts import PromptError, build_prompt, family_for, prompt_tokens
from speculative import Engine, GenerationResult, resolve_model_path
from speculative.build_info import build_info
from speculative.cost_model import CostModel, load_cost_model
from speculative.drafters import Auto, PromptLookup


class ModelWorker:
    """Owns the Engine; a newer request cancels the one in flight at its next step."""

    def __init__(self) -> None:
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="specfill-model")
        self._cancel = threading.Event()
        self.engine: Engine | None = None
        self.costs: CostModel | None = None
        self.drafter: Auto | None = None
        self.family = "prefix-only"
        self.error: str | None = None

    def load(self, settings: Settings) -> Future[str]:
        """Load (or reload) the model; the future's result is the path loaded."""
        return self._pool.submit(self._load, settings)

    def _load(self, settings: Settings) -> str:
        self.error = None
        if self.engine is not None:
            self.engine.close()
            self.engine = None
        try:
            path = resolve_model_path(settings.model.path or None)
            engine = Engine(path, n_ctx=settings.model.n_ctx, n_threads=settings.model.threads or None)
            self.costs = load_cost_model(engine, engine.n_threads, build_info()["build"])
        except Exception as exc:
            self.error = str(exc)
            raise
        self.family = family_for(engine)
        self.drafter = Auto(PromptLookup(), None)
        self.engine = engine
        return str(path)

    def complete(self, prefix: str, suffix: str, path: str, settings: Settings) -> Future[GenerationResult | None]:
        self._cancel.set()  # supersede whatever runs now
        cancel = threading.Event()
        self._cancel = cancel
        return self._pool.submit(self._complete, prefix, suffix, path, settings, cancel)

    def _complete(self, prefix: str, suffix: str, path: str, settings: Settings,
                  cancel: threading.Event) -> GenerationResult | None:
        if cancel.is_set() or self.engine is None:
            return None
        engine = self.engine
        max_tokens = max(1, min(settings.completion.max_tokens, engine.n_ctx // 2))
        parts = build_prompt(self.family, prefix, suffix, path)
        try:
            tokens = prompt_tokens(engine, parts, engine.n_ctx - max_tokens - 1)
        except PromptError:
            return None
        stop = parts.stop + (("\n",) if suffix.split("\n", 1)[0].strip() else ())
        suffix_ids = engine.tokenize(suffix[:4000], parse_special=False)  # text worth copying from
        return engine.generate(tokens, max_tokens=max_tokens, stop=stop,
                               budget_s=settings.completion.budget_ms / 1000, cancel=cancel,
                               drafter=self.drafter, costs=self.costs, extra_sources=[suffix_ids])

    def shutdown(self) -> None:
        self._cancel.set()
        self._pool.shutdown(wait=True, cancel_futures=True)
        if self.engine is not None:
            self.engine.close()
