"""The settings schema: nested dataclasses with defaults, camelCase on the wire.

This is the one place settings are defined; `schema()` renders it for the editors and the
README. Invalid values keep their defaults and are reported by field name.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass, field
from typing import Any

from prompts.templates import FAMILIES


def _opt(default: Any, doc: str, choices: tuple | None = None, lo: int | None = None, hi: int | None = None):
    meta = {"doc": doc, "choices": choices, "min": lo, "max": hi}
    return field(default=default, metadata=meta)


@dataclass(kw_only=True)
class RemoteSettings:
    url: str = _opt("", "a serving engine (http://host:port) to complete with instead of a local model; "
                        "empty = local. Its own speculation replaces specfill's")
    kind: str = _opt("llama-server", "llama-server: llama.cpp's /infill (FIM done by the server); "
                                     "openai: /v1/completions (vLLM, llama-cpp-python's server)",
                     choices=("llama-server", "openai"))
    model: str = _opt("", "model name sent to an openai-kind engine; empty = the engine's default")
    template: str = _opt("prefix-only", "prompt family specfill spells out for the remote model "
                                        "(openai kind, or a llama-server whose model lacks FIM tokens)",
                         choices=tuple(FAMILIES))
    api_key: str = _opt("", "sent as a Bearer token; empty = none")
    connect_timeout_ms: int = _opt(1000, "per connection attempt; refused or timed-out connects are "
                                         "retried twice with backoff", lo=10, hi=60000)
    read_timeout_ms: int = _opt(5000, "longest silence of the engine before the request fails", lo=10, hi=600000)


@dataclass(kw_only=True)
class ModelSettings:
    path: str = _opt("", "GGUF file, or a packaged model name; empty = the embedded SmolLM2-135M")
    draft_path: str = _opt("", "GGUF draft model for speculation.method draft/auto; empty = none")
    n_ctx: int = _opt(4096, "context length in tokens", lo=256, hi=131072)
    threads: int = _opt(0, "decode threads; 0 = all cores", lo=0, hi=256)
    remote: RemoteSettings = field(default_factory=RemoteSettings)


@dataclass(kw_only=True)
class SpeculationSettings:
    method: str = _opt("auto", "auto: prompt lookup, then the draft model; lookup; draft; off",
                       choices=("auto", "lookup", "draft", "off"))
    max_draft: int = _opt(16, "most drafted tokens verified in one step", lo=0, hi=31)


@dataclass(kw_only=True)
class CompletionSettings:
    enable: bool = _opt(True, "show suggestions; the editors' toggle command flips it")
    max_tokens: int = _opt(48, "longest suggestion, in tokens", lo=1, hi=4096)
    debounce_ms: int = _opt(40, "wait after a keystroke before asking the model", lo=0, hi=5000)
    budget_ms: int = _opt(2000, "wall-clock budget of one generation", lo=10, hi=60000)
    multiline: str = _opt("auto", "auto: multi-line only at the end of a line; always; never",
                          choices=("auto", "always", "never"))
    candidates: int = _opt(3, "distinct suggestions for an explicit request (Invoked): branches from "
                              "the first token's top alternatives, decoded side by side", lo=1, hi=8)


@dataclass(kw_only=True)
class ContextSettings:
    open_files: bool = _opt(True, "other open documents: prompt context (models with file separators) "
                                  "and text for prompt lookup")
    workspace: bool = _opt(True, "files of the workspace folders (.gitignore respected; binary, huge and "
                                 "out-of-workspace files never read), kept current with watchfiles: context as above")


@dataclass(kw_only=True)
class ServerSettings:
    path: str = _opt("", "the specfill executable the editors start; empty = `specfill` on PATH "
                         "(read by the editors, not the server)")


@dataclass(kw_only=True)
class Settings:
    model: ModelSettings = field(default_factory=ModelSettings)
    speculation: SpeculationSettings = field(default_factory=SpeculationSettings)
    completion: CompletionSettings = field(default_factory=CompletionSettings)
    context: ContextSettings = field(default_factory=ContextSettings)
    server: ServerSettings = field(default_factory=ServerSettings)
    log_level: str = _opt("info", "server log level", choices=("error", "warning", "info", "debug"))


def _snake(name: str) -> str:
    return re.sub(r"(?<!^)([A-Z])", r"_\1", name).lower()


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(w.title() for w in rest)


def _valid(f: dataclasses.Field, value: Any, current: Any) -> bool:
    if type(value) is not type(current):  # bool is not int, int is not str
        return False
    meta = f.metadata
    if meta.get("choices") and value not in meta["choices"]:
        return False
    if isinstance(value, int) and not isinstance(value, bool):
        if meta.get("min") is not None and value < meta["min"]:
            return False
        if meta.get("max") is not None and value > meta["max"]:
            return False
    return True


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
        elif _valid(f, value, current):
            setattr(obj, f.name, value)
        else:
            errors.append(f"{where}{key}: invalid value {value!r}, using {current!r}")


def parse_settings(data: Any) -> tuple[Settings, list[str]]:
    """Settings from wire data; invalid fields keep their defaults and are named in errors."""
    settings, errors = Settings(), []
    if data == []:  # Lua clients send an empty table as an empty array
        data = {}
    if isinstance(data, dict):
        section = data.get("specfill", data)
        if section == []:
            section = {}
        if isinstance(section, dict):
            _fill(settings, section, "", errors)
        else:
            errors.append("specfill: expected an object")
    elif data is not None:
        errors.append("settings: expected an object")
    return settings, errors


def to_wire(settings: Settings) -> dict:
    """Settings as the editors send them: nested, camelCase."""
    def conv(obj: Any) -> Any:
        if dataclasses.is_dataclass(obj):
            return {_camel(f.name): conv(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
        return obj

    return conv(settings)


def schema() -> dict[str, dict]:
    """Every setting by its dotted wire name (`specfill.model.nCtx`): type, default, doc,
    choices and bounds. The VS Code manifest and the Neovim defaults are checked against it."""
    out: dict[str, dict] = {}

    def walk(obj: Any, prefix: str) -> None:
        for f in dataclasses.fields(obj):
            value = getattr(obj, f.name)
            name = f"{prefix}.{_camel(f.name)}"
            if dataclasses.is_dataclass(value):
                walk(value, name)
                continue
            entry = {"type": {bool: "boolean", int: "integer", str: "string"}[type(value)], "default": value,
                     "description": f.metadata.get("doc", "")}
            if f.metadata.get("choices"):
                entry["enum"] = list(f.metadata["choices"])
            if f.metadata.get("min") is not None:
                entry["minimum"] = f.metadata["min"]
            if f.metadata.get("max") is not None:
                entry["maximum"] = f.metadata["max"]
            out[name] = entry

    walk(Settings(), "specfill")
    return out
