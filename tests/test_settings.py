"""One settings schema: camelCase on the wire, defaults on bad values, named errors."""

from lsp_server.settings import Settings, parse_settings, schema, to_wire


def test_defaults_and_camel_case_round_trip():
    s, errors = parse_settings({"specfill": {"model": {"nCtx": 2048, "draftPath": "/d.gguf"},
                                             "completion": {"maxTokens": 16, "multiline": "never"},
                                             "speculation": {"method": "lookup", "maxDraft": 4},
                                             "context": {"openFiles": False}, "logLevel": "debug"}})
    assert errors == []
    assert (s.model.n_ctx, s.model.draft_path, s.completion.max_tokens) == (2048, "/d.gguf", 16)
    assert (s.completion.multiline, s.speculation.method, s.speculation.max_draft) == ("never", "lookup", 4)
    assert s.context.open_files is False and s.log_level == "debug"
    assert parse_settings(to_wire(s))[0] == s


def test_invalid_values_keep_defaults_and_name_the_field():
    s, errors = parse_settings({"completion": {"maxTokens": "many", "multiline": "sometimes", "debounceMs": -5},
                                "model": {"nCtx": 10, "threads": True}, "speculation": {"method": "magic"},
                                "typo": 1, "context": 3})
    assert s == Settings()
    text = "\n".join(errors)
    for field in ("completion.maxTokens", "completion.multiline", "completion.debounceMs", "model.nCtx",
                  "model.threads", "speculation.method", "typo: unknown setting", "context: expected an object"):
        assert field in text


def test_settings_the_editor_client_owns_are_accepted_silently():
    """VS Code's language client reads `specfill.trace.server` itself; a user who sets it
    has done nothing wrong. The same key deeper down is still unknown."""
    s, errors = parse_settings({"specfill": {"trace": {"server": "verbose"}, "completion": {"maxTokens": 8}}})
    assert errors == [] and s.completion.max_tokens == 8
    assert parse_settings({"completion": {"trace": 1}})[1] == ["completion.trace: unknown setting"]


def test_non_object_settings_are_reported():
    assert parse_settings(None) == (Settings(), [])
    assert parse_settings([1, 2])[1] == ["settings: expected an object"]
    assert parse_settings({"specfill": 5})[1] == ["specfill: expected an object"]


def test_schema_lists_every_setting_with_type_default_and_description():
    sch = schema()
    assert sch["specfill.model.nCtx"] == {"type": "integer", "default": 4096, "description": "context length in tokens",
                                          "minimum": 256, "maximum": 131072}
    assert sch["specfill.speculation.method"]["enum"] == ["auto", "lookup", "draft", "off"]
    assert sch["specfill.context.openFiles"]["type"] == "boolean"
    assert sch["specfill.model.remote.kind"]["enum"] == ["llama-server", "openai"]
    assert sch["specfill.completion.minConfidence"]["type"] == "number"
    assert len(sch) == 38 and all(v["description"] for v in sch.values())
    assert sch["specfill.context.exclude"]["items"] == {"type": "string"}
    assert sch["specfill.completion.languages"]["additionalProperties"] == {"type": "boolean"}


def test_readme_documents_every_setting_with_its_default():
    from pathlib import Path

    from lsp_server.schema_export import readme_default

    readme = (Path(__file__).parents[1] / "README.md").read_text()
    for name, entry in schema().items():
        default = readme_default(entry["default"])
        assert f"| `{name.removeprefix('specfill.')}` | `{default}` |" in readme, name


def test_editor_copies_of_the_schema_are_current():
    """VS Code's manifest, the Neovim schema and its help are generated from the one schema
    (`specfill schema --write`); a setting added on one side only fails here."""
    import json
    from pathlib import Path

    from lsp_server import schema_export

    root = Path(__file__).parents[1]
    manifest = json.loads((root / schema_export.VSCODE_MANIFEST).read_text())
    assert manifest["contributes"]["configuration"]["properties"] == schema_export.vscode_properties()
    assert (root / schema_export.NVIM_SCHEMA).read_text() == schema_export.lua_module()
    doc = (root / schema_export.NVIM_DOC).read_text()
    assert schema_export.nvim_doc(doc) == doc
    for name in schema():
        assert name.removeprefix("specfill.") in doc
    readme = (root / schema_export.README).read_text()
    assert schema_export.readme(readme) == readme


def test_number_settings_take_ints_and_floats_within_bounds():
    s, errors = parse_settings({"completion": {"minConfidence": 0.25}})
    assert s.completion.min_confidence == 0.25 and not errors
    s, errors = parse_settings({"completion": {"minConfidence": 1}})  # JSON and Lua send 1 for 1.0
    assert s.completion.min_confidence == 1.0 and isinstance(s.completion.min_confidence, float) and not errors
    for bad in (1.5, -0.1, "0.3", True):
        s, errors = parse_settings({"completion": {"minConfidence": bad}})
        assert s.completion.min_confidence == Settings().completion.min_confidence
        assert "completion.minConfidence" in errors[0]
