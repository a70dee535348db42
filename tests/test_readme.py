"""Every `unspecific ...` command the README shows runs: each is parsed by the real command line
(an unknown flag such as `corpus add --topic` fails here), its command's `--help` works, and the
import examples run for real, as dry runs, on files made to their formats."""

from __future__ import annotations

import itertools
import re
import shlex
from pathlib import Path

import pytest

from pipeline.cli import build_parser, main

ROOT = Path(__file__).parent.parent
README = ROOT / "README.md"
DOCS = sorted((ROOT / "docs").glob("*.md"))


def readme_commands(pages: list[Path] | None = None) -> list[str]:
    """Lines of the README's code blocks that start with `unspecific`, comments dropped."""
    commands, fenced = [], False
    for line in "\n".join(p.read_text(encoding="utf-8") for p in pages or [README]).splitlines():
        if line.strip().startswith("```"):
            fenced = not fenced
            continue
        text = line.strip()
        if fenced and (text == "unspecific" or text.startswith("unspecific ")):
            commands.append(re.sub(r"\s+#.*$", "", text).strip())
    return commands


def variants(command: str) -> list[list[str]]:
    """The argument lists a README line stands for: each `[optional part]` with and without it
    (all in, all out), and each `a|b|c` word as each of its alternatives."""
    words = shlex.split(command)[1:]
    with_all = [w.strip("[]") for w in words if w.strip("[]")]
    without: list[str] = []
    depth = 0
    for w in words:
        depth += w.count("[")
        if depth == 0:
            without.append(w)
        depth -= w.count("]")
    out = []
    for args in (with_all, without):
        choices = [w.split("|") if re.fullmatch(r"[a-z]+(\|[a-z]+)+", w) else [w] for w in args]
        out += [list(c) for c in itertools.product(*choices)]
    unique = []
    for v in out:
        if v not in unique:
            unique.append(v)
    return unique


COMMANDS = readme_commands()
# The docs' commands are held to the same check: every page a user reads shows commands that parse.
DOC_COMMANDS = readme_commands(DOCS)


def test_the_readme_shows_commands():
    assert len(COMMANDS) >= 15 and any(c.startswith("unspecific import ") for c in COMMANDS)


def test_the_readme_is_for_users():
    """At most 250 lines: what it is, the two commands, a tour, the CLI, configuration, links.
    Measurements and how-tos live in docs/, and every page it links exists."""
    import re as _re

    text = README.read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 250
    links = _re.findall(r"\]\(([^)#]+)\)", text)
    assert links and [link for link in links if not (ROOT / link).exists()] == []


def test_the_readme_library_example_runs(tmp_path, capsys):
    """The README's Python example, run as written on a small synthetic store."""
    import os
    import re as _re

    from tests.fakes.synthetic import SyntheticSpec, build_synthetic_store

    code = _re.search(r"```python\n(.*?)```", README.read_text(encoding="utf-8"), _re.S).group(1)
    build_synthetic_store(tmp_path / "store.sqlite", SyntheticSpec(n_instructions=4, n_constraints=5))
    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        exec(compile(code, "README.md", "exec"), {})
    finally:
        os.chdir(cwd)
    assert "Org " in capsys.readouterr().out


@pytest.mark.parametrize("command", COMMANDS + DOC_COMMANDS)
def test_readme_command_parses(command, capsys):
    parser = build_parser()
    for args in variants(command):
        try:
            parsed = parser.parse_args(args)
        except SystemExit as exc:
            pytest.fail(f"README: `{command}` as {args}: {capsys.readouterr().err.strip()} (exit {exc.code})")
        if args:
            assert parsed.command == args[0]


@pytest.mark.parametrize("command", sorted({tuple(v[:2]) if len(v) > 1 and not v[1].startswith("-") and
                                           v[0] in ("corpus", "local", "cache", "config") else tuple(v[:1])
                                           for c in COMMANDS + DOC_COMMANDS for v in variants(c) if v}))
def test_readme_command_help(command, capsys):
    with pytest.raises(SystemExit) as exc:
        main([*command, "--help"])
    assert exc.value.code == 0 and "usage: unspecific" in capsys.readouterr().out


def test_readme_import_examples_run_as_dry_runs(tmp_path, monkeypatch, capsys):
    """The import lines, run for real (with --dry-run, then for real for those later lines need),
    in a folder holding files named as the README names them."""
    from tests.support.import_files import CS4_HEADER, LONG, cs4_rows, write_csv, write_jsonl

    monkeypatch.chdir(tmp_path)
    write_csv(tmp_path / "Story-based Constraints.csv", CS4_HEADER, cs4_rows(2))
    from tests.support.research_run import write_run

    write_run(tmp_path / "outputs")  # the research code's files, as its writers write them
    write_jsonl(tmp_path / "benchmark.jsonl",
                [{"id": "q1", "instruction": "Write a post.", "constraints": ["Mention x."]}])
    # Instruction 1 of the research run, condition none: its source id is its instruction_number.
    write_jsonl(tmp_path / "harness.jsonl",
                [{"instruction": "1", "model": "my-harness", "mode": "direct", "text": LONG}])
    # A harness log (inspect, lm-eval) is written by that harness: tests/test_harness.py imports real ones.
    lines = [c for c in COMMANDS
             if c.startswith("unspecific import ") and c.split()[2] not in ("inspect", "lm-eval")]
    assert len(lines) == 4
    store = str(tmp_path / "store.sqlite")
    for command in lines:
        args = variants(command)[0]
        assert main(["--store", store, *args, "--dry-run"]) == 0, (command, capsys.readouterr().err)
        assert "dry run: nothing was written" in capsys.readouterr().out
        # Written for real, so the responses line finds the instructions the research line imports.
        assert main(["--store", store,
                     *(a for a in args if a != "--dry-run")]) == 0, (command, capsys.readouterr().err)
        assert "added" in capsys.readouterr().out
