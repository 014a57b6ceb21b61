"""Everyday controls, as pure rules: suggestions per language (over the defaults), the manual
trigger, and files kept out of prompts (.gitignore-style patterns)."""

from lsp_server.session.controls import excluded, language_on, refusal, suggestions_allowed
from lsp_server.settings import EXCLUDE, Settings, parse_settings


def test_secrets_are_kept_out_by_default_and_code_is_not():
    for path in ("/home/u/app/.env", "/home/u/app/.env.local", "/srv/tls/server.pem", "/home/u/.ssh/id_rsa",
                 "/home/u/.ssh/id_ed25519.pub", "/app/config/secrets/db.py", "/app/aws_credentials.json",
                 "C:\\Users\\u\\app\\.env", "/home/u/.netrc"):
        assert excluded(path, EXCLUDE), path
    for path in ("/home/u/app/main.py", "/home/u/app/environment.py", "/home/u/app/keys.py", "/app/README.md", ""):
        assert not excluded(path, EXCLUDE), path


def test_a_negated_pattern_takes_a_file_back_and_the_users_list_replaces_the_defaults():
    assert not excluded("/app/secret_santa.py", [*EXCLUDE, "!secret_santa.py"])
    assert excluded("/app/build/out.log", ["build/"]) and not excluded("/app/.env", ["build/"])


def test_languages_off_by_default_are_prose_and_commit_messages_and_a_users_map_adds_to_them():
    s = Settings()
    assert language_on(s, "python") and language_on(s, "go")
    assert not language_on(s, "markdown") and not language_on(s, "plaintext") and not language_on(s, "git-commit")
    s, errors = parse_settings({"completion": {"languages": {"markdown": True, "python": False}}})
    assert not errors and language_on(s, "markdown") and not language_on(s, "python")
    assert not language_on(s, "plaintext") and language_on(s, "rust")  # the defaults stay for the rest
    s, _ = parse_settings({"completion": {"languages": {"*": False, "python": True}}})
    assert language_on(s, "python") and not language_on(s, "rust")


def test_manual_mode_answers_only_the_trigger_key():
    s, _ = parse_settings({"completion": {"trigger": "manual"}})
    assert not suggestions_allowed(s, "/a.py", "python", invoked=False)
    assert suggestions_allowed(s, "/a.py", "python", invoked=True)
    assert suggestions_allowed(Settings(), "/a.py", "python", invoked=False)
    assert not suggestions_allowed(Settings(), "/a/.env", "dotenv", invoked=True)
    assert not suggestions_allowed(Settings(), "/a/notes.md", "markdown", invoked=True)


def test_list_and_map_settings_keep_their_defaults_when_their_items_are_wrong():
    s, errors = parse_settings({"completion": {"languages": {"python": "yes"}}, "context": {"exclude": [".env", 3]}})
    assert s == Settings() and len(errors) == 2
    assert "completion.languages" in errors[0] and "context.exclude" in errors[1]


def test_the_refusal_names_the_setting_behind_it():
    assert refusal(Settings(), "/a/notes.md", "markdown", invoked=True) == \
        "suggestions are off for markdown (completion.languages)"
    assert refusal(Settings(), "/a/.env", "dotenv", invoked=True) == \
        "the file is kept out of prompts (context.exclude)"
    assert refusal(Settings(), "/a.py", "python", invoked=False) is None
