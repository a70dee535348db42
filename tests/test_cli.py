"""The command line through pipeline.cli.main: help, config show, errors, local status."""

from __future__ import annotations

import json

import pytest

from pipeline.cli import main

SECRET = "sk-cli-SECRET-0987654321"

CONFIG = """
[endpoints.gpt]
base_url = "https://api.openai.com/v1"
model = "gpt-4o-mini"
api_key_env = "UNSPECIFIC_CLI_TEST_KEY"

[roles]
generator = "gpt"
"""


@pytest.fixture(autouse=True)
def wide_terminal(monkeypatch):
    """Rich wraps at the terminal's width; a wide one keeps asserted words whole."""
    monkeypatch.setenv("COLUMNS", "400")


def test_help_lists_the_commands(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["--help"])
    assert exc.value.code == 0
    out = capsys.readouterr().out
    for command in ("init", "config", "local", "cache"):
        assert command in out


def test_every_listed_command_module_registers_its_command():
    import pathlib

    import pipeline.cli as cli

    parser = cli.build_parser()
    subparsers = next(a for a in parser._actions if a.dest == "command")
    assert set(cli.COMMANDS) <= set(subparsers.choices)  # a module may add a command of its own beside
    modules = sorted(p.name.removesuffix("_cmd.py")
                     for p in pathlib.Path(cli.__file__).parent.glob("*_cmd.py"))
    assert modules == sorted(cli.COMMANDS)


def test_a_command_module_that_fails_to_import_is_an_error(monkeypatch):
    """A listed command whose module is missing (or breaks on import) stops the CLI; it is never
    silently left out of the help."""
    import pipeline.cli as cli

    monkeypatch.setattr(cli, "COMMANDS", [*cli.COMMANDS, "no_such"])
    with pytest.raises(ModuleNotFoundError, match="pipeline.cli.no_such_cmd"):
        cli.build_parser()


def test_help_does_not_import_heavy_libraries():
    import subprocess
    import sys

    code = (
        "import sys\nfrom pipeline.cli import main\n"
        "try:\n    main(['--help'])\nexcept SystemExit:\n    pass\n"
        "heavy = [m for m in ('torch', 'sentence_transformers', 'llama_cpp', 'openai', 'httpx', "
        "'textual', 'numpy') "
        "if m in sys.modules]\nprint(','.join(heavy), file=sys.stderr)"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert result.stderr.strip() == ""


def test_config_show_masks_keys(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("UNSPECIFIC_CLI_TEST_KEY", SECRET)
    path = tmp_path / "unspecific.toml"
    path.write_text(CONFIG)
    assert main(["--config", str(path), "config", "show"]) == 0
    out = capsys.readouterr().out
    assert "gpt-4o-mini" in out and "UNSPECIFIC_CLI_TEST_KEY" in out and "****" in out
    assert SECRET not in out
    assert main(["--config", str(path), "config", "show", "--json"]) == 0
    out = capsys.readouterr().out
    data = json.loads(out)
    assert data["endpoints"]["gpt"]["api_key"] == "****(set)"
    assert SECRET not in out


def test_bad_config_exits_2_naming_the_field(tmp_path, capsys):
    path = tmp_path / "unspecific.toml"
    path.write_text('[endpoints.gpt]\nbase_url = "https://api.example.com/v1"\nmodel = '
                    '"m"\nconcurrency = -3\n')
    assert main(["--config", str(path), "config", "check"]) == 2
    err = capsys.readouterr().err
    assert "endpoints.gpt.concurrency" in err and "Configuration error" in err


def test_missing_key_variable_exits_2(tmp_path, monkeypatch, capsys):
    monkeypatch.delenv("UNSPECIFIC_CLI_TEST_KEY", raising=False)
    path = tmp_path / "unspecific.toml"
    path.write_text(CONFIG)
    assert main(["--config", str(path), "config", "show"]) == 2
    err = capsys.readouterr().err
    assert "endpoints.gpt.api_key_env" in err and "UNSPECIFIC_CLI_TEST_KEY" in err


def test_init_creates_store_and_config(tmp_path, capsys):
    store, cfg = tmp_path / "s.sqlite", tmp_path / "u.toml"
    assert main(["--store", str(store), "--config", str(cfg), "init"]) == 0
    assert store.exists() and cfg.exists()
    assert main(["--store", str(store), "--config", str(cfg), "config", "check"]) == 0


def test_local_status_json(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("UNSPECIFIC_CACHE", str(tmp_path / "cache"))
    assert main(["local", "status", "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["model_bytes"] is None and info["model_ok"] is False
    assert info["server"] is None and info["expected_bytes"] == 1_117_320_768


def test_local_stop_with_nothing_running(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("UNSPECIFIC_CACHE", str(tmp_path / "cache"))
    assert main(["local", "stop"]) == 0
    assert "nothing to stop" in capsys.readouterr().out
