"""The smaller user errors of the command line (issue 29, item 7): each exits 2 with one line naming
what is wrong and where, and stores nothing. And `make test`'s own setup (item 8): the browser the
tests need is installed by a make target the test target depends on, so `.ci/run` calls nothing else."""

from __future__ import annotations

import csv
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from pipeline.cli import main
from pipeline.store.database import open_store
from tests.fakes.synthetic import SyntheticSpec, build_synthetic_store

ROOT = Path(__file__).resolve().parents[1]
TABLES = ("articles", "runs", "instructions", "generations", "verdicts", "annotations", "llm_calls")


@pytest.fixture
def store_path(seeded_copy: Path) -> Path:
    return seeded_copy


def counts(path: Path) -> dict[str, int]:
    store = open_store(path, create=False)
    try:
        return {t: store.scalar(f"SELECT count(*) FROM {t}") for t in TABLES}
    finally:
        store.close()


def cli(capsys, monkeypatch, *argv: str) -> tuple[int, str]:
    """Exit code and stderr; argparse's own errors (SystemExit) count as exits too."""
    monkeypatch.setenv("COLUMNS", "400")  # no wrapping
    try:
        code = main(list(argv))
    except SystemExit as exc:
        code = int(exc.code or 0)
    return code, capsys.readouterr().err.strip()


def last_line(err: str) -> str:
    return err.splitlines()[-1] if err else ""


def test_corpus_add_of_a_file_format_without_a_path(tmp_path, capsys, monkeypatch) -> None:
    path = tmp_path / "store.sqlite"
    code, err = cli(capsys, monkeypatch, "--store", str(path), "corpus", "add", "--format", "jsonl",
                    "--domain", "x")
    assert code == 2
    assert err == ("Corpus error: --format jsonl reads your own file or folder: give its PATH "
                   "(only bbc-news / news-articles need none)")
    assert not path.exists()  # refused before any store was made


@pytest.mark.parametrize("value", ["-1", "0"])
@pytest.mark.parametrize("command", ["evaluate", "naturalness"])
def test_evaluate_max_units_below_one_records_nothing(store_path, capsys, monkeypatch,
                                                      command, value) -> None:
    before = counts(store_path)
    code, err = cli(capsys, monkeypatch, "--store", str(store_path), command, "--max-units", value)
    assert code == 2
    assert (last_line(err) == f"unspecific {command}: error: argument --max-units: expected a "
                              f"positive number, got {value}")
    assert counts(store_path) == before  # no paused run recorded


def test_validate_import_of_a_bad_sheet_exits_2_and_saves_nothing(store_path, tmp_path, capsys,
                                                                  monkeypatch) -> None:
    store = str(store_path)
    assert main(["--store", store, "validate", "plan", "--per-domain", "3", "--passed", "2"]) == 0
    sheet = tmp_path / "sheet.csv"
    assert main(["--store", store, "validate", "export", "--out", str(sheet), "--annotator", "ann"]) == 0
    rows = list(csv.DictReader(sheet.open()))
    for row in rows:
        row["label"] = "integrated"
    rows[1]["label"] = "maybe"
    with sheet.open("w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    before = counts(store_path)
    capsys.readouterr()
    code, err = cli(capsys, monkeypatch, "--store", store, "validate", "import", str(sheet))
    assert code == 2
    assert "sheet.csv:3" in err and "'maybe'" in err and "nothing saved" in err
    assert counts(store_path) == before


def test_export_of_an_unknown_run_names_it_and_the_runs_there_are(store_path, tmp_path, capsys,
                                                                  monkeypatch) -> None:
    out = tmp_path / "out.jsonl"
    code, err = cli(capsys, monkeypatch, "--store", str(store_path), "export", "--run", "nosuch",
                    "--out", str(out))
    assert code == 2
    assert err == f"Error: --run nosuch: matches no instruction in {store_path} (here: synthetic)"
    assert not out.exists()
    assert main(["--store", str(store_path), "export", "--run", "synthetic", "--out", str(out)]) == 0


@pytest.mark.parametrize(("config", "message"), [
    (None, "config file not found"),
    ("[endpoints.x\nbase_url = 1\n", "not valid TOML"),
])
def test_report_rejects_a_missing_or_malformed_config_as_evaluate_does(store_path, tmp_path,
                                                                       capsys, monkeypatch,
                                                                       config, message) -> None:
    path = tmp_path / "c.toml"
    if config is not None:
        path.write_text(config)
    for command in (["evaluate"], ["report", "--no-copy", "--resamples", "10"]):
        code, err = cli(capsys, monkeypatch, "--store", str(store_path), "--config", str(path), *command)
        assert code == 2, command
        assert err.startswith(f"Configuration error: {path}: {message}") and len(err.splitlines()) == 1


def test_report_at_a_ratio_with_no_summaries_names_the_ratios_there_are(store_path, capsys,
                                                                        monkeypatch) -> None:
    argv = ["--store", str(store_path), "report", "--no-copy", "--resamples", "10"]
    code, err = cli(capsys, monkeypatch, *argv, "--ratio", "0.77")
    assert code == 2
    assert (err == f"Error: --ratio 0.77: no summaries at that ratio in {store_path} "
                   "(summaries here are at 0.25)")
    assert cli(capsys, monkeypatch, *argv, "--ratio", "0.25")[0] == 0
    assert cli(capsys, monkeypatch, *argv)[0] == 0  # the default ratio


def test_import_help_names_each_set_of_values_once(capsys, monkeypatch) -> None:
    monkeypatch.setenv("COLUMNS", "100")
    with pytest.raises(SystemExit):
        main(["import", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert len(re.findall(r"response\W+summary\W+(?:or\s+)?base", text)) == 1, text
    assert len(re.findall(r"cs4\W+research\W+jsonl",
                          text)) == 0  # the description names the formats, one by one
    assert text.count("responses (one response a line") == 1


@pytest.mark.parametrize("shaping", [[], ["--domain", "news"], ["--n", "2", "--conditions", "eval"]])
def test_build_with_an_unknown_run_lists_the_build_runs_and_is_not_a_new_run(store_path, tmp_path, capsys,
                                                                              monkeypatch, shaping) -> None:
    """A mistyped --run, alone or with any build option, lists the runs (exit 2) before any call: a
    new run is named with --new-run."""
    # An endpoint nobody answers: the command must stop before any call.
    (tmp_path / "c.toml").write_text("[endpoints.f]\nbase_url = 'http://127.0.0.1:9/v1'\nmodel = 'm'\n"
                                     "[roles]\ngenerator = 'f'\njudges = ['f']\n")
    before = counts(store_path)
    code, err = cli(capsys, monkeypatch, "--store", str(store_path), "--config",
                    str(tmp_path / "c.toml"), "build",
                    "--run", "no-such-run", *shaping)
    assert code == 2
    assert err.startswith("Stage error: --run no-such-run: no build run of that name (build "
                          "runs here: synthetic)")
    assert "--new-run no-such-run" in err
    assert counts(store_path) == before


def test_build_refuses_run_and_new_run_together(store_path, capsys, monkeypatch) -> None:
    code, err = cli(capsys, monkeypatch, "--store", str(store_path), "build", "--run", "a", "--new-run", "b")
    assert code == 2 and "not allowed with argument" in err


def test_new_run_resumes_its_own_build_and_refuses_another_under_its_name(tmp_path, capsys) -> None:
    from tests.fakes.fake_server import FakeOpenAIServer
    from tests.fakes.responders import ScriptedModel, config_toml, make_store

    path = tmp_path / "store.sqlite"
    make_store(path, 1).close()
    with FakeOpenAIServer(ScriptedModel()) as server:
        (tmp_path / "c.toml").write_text(config_toml(server.base_url))
        base = ["--store", str(path), "--config", str(tmp_path / "c.toml"), "build", "--n", "1",
                "--constraints", "6",
                "--words", "50", "--conditions", "single", "--new-run", "mine"]
        assert main(base) == 0
        calls = server.calls
        assert main(base) == 0 and server.calls == calls  # the same command again resumes it: all stored
        capsys.readouterr()
        assert main([*base, "--constraints", "7"]) == 2
    err = capsys.readouterr().err
    assert "--new-run mine: a build run of that name exists with other options (n_constraints)" in err


# -- make test on a fresh machine -------------------------------------------------------------------


def _make(*argv: str, cwd: Path, as_nobody: bool = False) -> subprocess.CompletedProcess:
    command = ["make", "--no-print-directory", *argv]
    if as_nobody and os.geteuid() == 0:
        command = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", *command]
    return subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=60)


def test_make_test_installs_the_browser_first() -> None:
    # -n prints the recipes and runs none: the test target's own setup includes the browser's.
    dry = _make("-n", "test", "CHROMIUM=/nonexistent/chromium", cwd=ROOT)
    assert dry.returncode == 0, dry.stderr
    assert "apt-get install -y -q --no-install-recommends chromium" in dry.stdout
    assert "[ ! -x /nonexistent/chromium ]" in dry.stdout


def test_make_browser_as_a_user_prints_the_one_command_and_fails(tmp_path) -> None:
    if os.geteuid() == 0 and not shutil.which("setpriv"):
        pytest.skip("running as root without setpriv: cannot drop to an ordinary user")
    shutil.copy(ROOT / "Makefile", tmp_path / "Makefile")
    tmp_path.chmod(0o755)
    done = _make("-s", "browser", "CHROMIUM=/nonexistent/chromium", cwd=tmp_path, as_nobody=True)
    assert done.returncode != 0
    assert "/nonexistent/chromium is missing; the browser tests need it" in done.stderr
    assert ("sudo sh -c 'apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q "
            "--no-install-recommends chromium'") in done.stderr


def test_make_browser_does_nothing_when_the_browser_is_there(tmp_path) -> None:
    browser = tmp_path / "chromium"
    browser.write_text("#!/bin/sh\n")
    browser.chmod(0o755)
    done = _make("-s", "browser", f"CHROMIUM={browser}", cwd=ROOT)
    assert done.returncode == 0 and done.stdout == "" and done.stderr == ""


def test_ci_calls_nothing_beyond_make_test() -> None:
    lines = [line.strip() for line in (ROOT / ".ci" / "run").read_text().splitlines()]
    commands = [line for line in lines if line and not line.startswith("#")]
    assert commands == ["set -euo pipefail", 'cd "$(dirname "$0")/.."', "make test"]


def test_report_reads_a_config_without_its_keys(tmp_path, monkeypatch, capsys):
    """A report calls no endpoint: a config naming a key variable that is not set is fine there
    (evaluate, which calls, refuses it)."""
    from pipeline.cli import main

    store = tmp_path / "store.sqlite"
    build_synthetic_store(store, SyntheticSpec(n_instructions=2, n_constraints=4))
    cfg = tmp_path / "unspecific.toml"
    cfg.write_text('[endpoints.gpt]\nbase_url = "https://example.invalid/v1"\nmodel = "m"\n'
                   'api_key_env = "UNSPECIFIC_TEST_UNSET_KEY"\n')
    monkeypatch.delenv("UNSPECIFIC_TEST_UNSET_KEY", raising=False)
    assert main(["--store", str(store), "--config", str(cfg), "report", "--no-copy"]) == 0
    assert main(["--store", str(store), "--config", str(cfg), "evaluate", "--dry-run"]) == 2
    assert "UNSPECIFIC_TEST_UNSET_KEY" in capsys.readouterr().err
