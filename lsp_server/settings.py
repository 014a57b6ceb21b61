"""The settings schema: nested dataclasses with defaults, camelCase on the wire."""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass, field
from typing import Any


@dataclass(kw_only=True)
class ModelSettings:
    path: str = ""  # empty: the embedded default model
    n_ctx: int = 4096
    threads: int = 0  # 0: all cores


@dataclass(kw_only=True)
class CompletionSettings:
    max_tokens: int = 48
    budget_ms: int = 2000


@dataclass(kw_only=True)
class Settings:
    model: ModelSettings = field(default_factory=ModelSettings)
    completion: CompletionSettings = field(default_factory=CompletionSettings)


def _snake(name: str) -> str:
    return re.sub(r"(?<!^)([A-Z])", r"_\1", name).lower()


def _fill(obj: Any, data: dict, where: str, errors: list[str]) -> None:
    names = {f.name: f for f in dataclasses.fields(obj)}
    for key, value in data.items():
        f = names.get(_snake(key))
        if f is None:
            errors.append(f"{where}{key}: unknown setting")
            continue
        current = getattr(obj, f.name)
        if dataclasses.is_dataclass(current):
            if isinstance(value, dict):
                _fill(current, value, f"{where}{key}.", errors)
            else:
                errors.append(f"{where}{key}: expected an object")
        elif type(value) is type(current) and not (isinstance(value, int) and value < 0):
            setattr(obj, f.name, value)
        else:
            errors.append(f"{where}{key}: invalid value {value!r}, using {current!r}")


def parse_settings(data: Any) -> tuple[Settings, list[str]]:
    """Settings from wire data; invalid fields keep their defaults and are named in errors."""
    settings, errors = Settings(), []
    if isinstance(data, dict):
        _fill(settings, data.get("specfill", data), "", errors)
    elif data is not None:
        errors.append("settings: expected an object")
    return settings, errors
