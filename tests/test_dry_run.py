"""`--dry-run` on build, evaluate and naturalness: it prices what the command would send and
sends nothing (the fake server gets no request), writes nothing to the store (no run row, no
cached call), and the run made afterwards prints the estimate beside what it spent."""

from __future__ import annotations

import json
import re

from pipeline.store.database import open_store
from tests.fakes.fake_server import FakeOpenAIServer
from tests.fakes.responders import ScriptedModel, config_toml, make_store


def _config(tmp_path, base_url: str):
    cfg = tmp_path / "c.toml"
    text = config_toml(base_url, concurrency=2).replace(
        'max_retries = 1\n',
        'max_retries = 1\nprice_prompt_per_mtok = 1.0\nprice_completion_per_mtok = 4.0\n', 1)
    cfg.write_text(text)
    return cfg


def _counts(path) -> tuple[int, int, int]:
    store = open_store(path)
    try:
        return tuple(  # type: ignore[return-value]
            store.conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0]
            for t in ("runs", "llm_calls", "instructions"))
    finally:
        store.close()


def test_dry_run_sends_nothing_writes_nothing_and_the_run_reports_its_estimate(tmp_path, capsys,
                                                                               monkeypatch) -> None:
    from pipeline.cli import main

    monkeypatch.setenv("COLUMNS", "200")
    path = tmp_path / "store.sqlite"
    make_store(path, 3).close()
    build = ["build", "--n", "3", "--constraints", "8", "--words", "60"]
    with FakeOpenAIServer(ScriptedModel()) as server:
        cfg = _config(tmp_path, server.base_url)
        base = ["--store", str(path), "--config", str(cfg)]
        before = _counts(path)
        assert main([*base, *build, "--dry-run"]) == 0
        out = capsys.readouterr().out
        assert server.requests == []  # no call at all
        assert _counts(path) == before == (0, 0, 0)  # no run row, no cached call, no instruction
        assert "dry run" in out and "nothing was sent" in out and "guessed at 4 characters a token" in out
        saved = json.loads((tmp_path / "store.sqlite.estimates.json").read_text())
        (estimate,) = saved.values()
        assert estimate["calls"] > 0 and estimate["cost"] > 0
        assert abs(estimate["batch_cost"] - estimate["cost"] / 2) < 1e-6  # batch_discount 0.5

        # The build made for real: the estimate beside what it spent, kept in the run's config.
        assert main([*base, *build]) == 0
        out = capsys.readouterr().out
        assert "estimate before the run" in out
        store = open_store(path)
        try:
            (row,
             ) = store.conn.execute("SELECT config, calls, prompt_tokens, "
                                    "completion_tokens, cost FROM runs").fetchall()
        finally:
            store.close()
        kept = json.loads(row[0])["estimate"]
        assert kept["calls"] == estimate["calls"]
        sent = len(server.requests)
        assert sent == row[1]
        if True:
            print(f"build: estimated {estimate['calls']} calls, "
                  f"{estimate['prompt_tokens']}+{estimate['completion_tokens']}"
                  f" tokens ${estimate['cost']:.6f}; spent {row[1]} calls, {row[2]}+{row[3]} "
                  f"tokens ${row[4]:.6f}")
        assert 0.5 * sent <= estimate["calls"] <= 1.5 * sent

        # The same build under another run name asks the same calls: the cache holds every one.
        assert main([*base, *build, "--new-run", "again", "--dry-run"]) == 0
        capsys.readouterr()
        assert len(server.requests) == sent
        (est2,) = json.loads((tmp_path / "store.sqlite.estimates.json").read_text()).values()
        assert est2["calls"] == 0 and est2["cache_hits"] == sent
        assert est2["wall_s"] is None  # nothing to send: no time
        (tmp_path / "store.sqlite.estimates.json").unlink()

        # evaluate and naturalness: the same promise.
        runs_before = _counts(path)
        assert main([*base, "evaluate", "--ratios", "0.5", "--dry-run"]) == 0
        out = capsys.readouterr().out
        assert len(server.requests) == sent and _counts(path) == runs_before
        ev = next(v for k, v in json.loads((tmp_path / "store.sqlite.estimates.json").read_text()).items()
                  if k.startswith("evaluate:"))
        # the build's calls measured the endpoint's latency
        assert ev["calls"] > 0 and ev["wall_s"] is not None
        assert main([*base, "naturalness", "--dry-run"]) == 0
        capsys.readouterr()
        nat = next(v for k, v in json.loads((tmp_path / "store.sqlite.estimates.json").read_text()).items()
                   if k.startswith("naturalness:"))
        assert nat["calls"] > 0
        assert len(server.requests) == sent and _counts(path) == runs_before

        assert main([*base, "evaluate", "--ratios", "0.5"]) == 0
        out = capsys.readouterr().out
        assert "estimate before the run" in out
        spent = len(server.requests) - sent
        print(f"evaluate: estimated {ev['calls']} calls, "
              f"{ev['prompt_tokens']}+{ev['completion_tokens']} tokens "
              f"${ev['cost']:.6f}, wall {ev['wall_s']}; sent {spent}; spent: "
              f"{out.split('spent:')[-1].strip()}")
        assert 0.5 * spent <= ev["calls"] <= 1.5 * spent

    # `report` shows each run's estimate beside what it spent.
    assert main(["--store", str(path), "report"]) == 0
    out = capsys.readouterr().out
    assert f"estimated {estimate['calls']:,} calls" in out and f"estimated {ev['calls']:,} calls" in out


def test_dry_run_prices_from_the_cache_history_and_counts_what_the_cache_holds(tmp_path, capsys,
                                                                               monkeypatch) -> None:
    from pipeline.cli import main

    monkeypatch.setenv("COLUMNS", "200")
    path = tmp_path / "store.sqlite"
    make_store(path, 3).close()
    with FakeOpenAIServer(ScriptedModel()) as server:
        cfg = _config(tmp_path, server.base_url)
        base = ["--store", str(path), "--config", str(cfg)]
        assert main([*base, "build", "--n", "1", "--constraints", "8", "--words", "60"]) == 0
        first = len(server.requests)
        capsys.readouterr()
        before = _counts(path)
        three = ["build", "--n", "3", "--constraints", "8", "--words", "60"]
        assert main([*base, *three, "--dry-run"]) == 0
        out = capsys.readouterr().out
        assert len(server.requests) == first and _counts(path) == before
        assert "from their calls in the cache" in out  # the templates' measured tokens, not a guess
        (est,) = json.loads((tmp_path / "store.sqlite.estimates.json").read_text()).values()
        assert est["cache_hits"] == first  # the first pair's calls are the same calls
        assert est["wall_s"] is not None  # the endpoint's latency is measured
        assert main([*base, *three]) == 0
        print("history:", capsys.readouterr().out.split("estimate before the run:")[-1].strip())
        spent = len(server.requests) - first
        assert est["calls"] == spent


def test_dry_run_prices_a_lines_judge_under_a_grammar(tmp_path, capsys, monkeypatch) -> None:
    """A gbnf endpoint judging in lines: the estimator's scripted placeholder answers the
    grammar-carrying judge calls (every unit priced through), and the real run sends the grammar."""
    from pipeline.cli import main
    from pipeline.stages.judging import lines_grammar

    monkeypatch.setenv("COLUMNS", "200")
    path = tmp_path / "store.sqlite"
    make_store(path, 1).close()
    with FakeOpenAIServer(ScriptedModel()) as server:
        cfg = _config(tmp_path, server.base_url)
        cfg.write_text(cfg.read_text().replace('max_retries = 1\n',
                                               'max_retries = 1\njudge_format = "lines"\ngbnf = true\n', 1))
        base = ["--store", str(path), "--config", str(cfg)]
        assert main([*base, "build", "--n", "1", "--constraints", "8", "--words", "60"]) == 0
        sent = len(server.requests)
        capsys.readouterr()
        assert main([*base, "evaluate", "--ratios", "0.5", "--dry-run"]) == 0
        out = capsys.readouterr().out
        assert len(server.requests) == sent and "stopped at a call with no placeholder" not in out
        ev = next(v for k, v in json.loads((tmp_path / "store.sqlite.estimates.json").read_text()).items()
                  if k.startswith("evaluate:"))
        assert ev["calls"] > 0 and ev["unparsed"] == 0
        assert main([*base, "evaluate", "--ratios", "0.5"]) == 0
        judged = [r for r in server.requests[sent:]
                  if "one line per constraint" in r["messages"][0]["content"]]
        assert judged and all(
            r["grammar"] == lines_grammar(int(re.search(r"numbered from 1 to (\d+)",
                                                        r["messages"][0]["content"]).group(1)))
            for r in judged)
        assert 0.5 * (len(server.requests) - sent) <= ev["calls"] <= 1.5 * (len(server.requests) - sent)
