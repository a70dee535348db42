"""Every table the CLI prints, read in 80-, 120- and 160-column terminals (the report's and validate's
have tests/test_report_widths.py): config, cache list and stats, corpus list, the build and evaluate
summaries, naturalness and a dry run's estimate. Nothing cut to an ellipsis, no line wider than the
terminal, every value whole, and brackets in names kept (Rich reads "[direct]" as markup)."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from rich.console import Console

from pipeline.analysis.metrics.win_rates import WinRate
from pipeline.analysis.stats import Interval
from pipeline.cli import common, main
from pipeline.llm.pricing import Usage
from pipeline.outputs.tables import Block, Sheet, render_sheet
from pipeline.stages.build import BuildSummary, ConditionReport
from pipeline.stages.estimate import EndpointEstimate, Estimate
from pipeline.stages.evaluate import EvaluateSummary
from pipeline.stages.units import StageSummary
from tests.fakes.synthetic import SyntheticSpec, build_synthetic_store

WIDTHS = [80, 120, 160]
LONG_MODEL = "meta-llama/Llama-3.1-70B-Instruct"


@pytest.fixture
def terminal(monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest):  # noqa: ANN201
    """The CLI's console, a terminal of the test's width, recorded."""
    console = Console(width=request.param, force_terminal=True, color_system=None, record=True,
                      file=io.StringIO())
    monkeypatch.setattr(common, "console", lambda: console)
    return console


def _fits(console: Console, values: list[str]) -> str:
    out = console.export_text()
    width = console.width
    assert all(len(line) <= width for line in out.splitlines()), "a line wider than the terminal"
    assert "…" not in out, "a header or a value was cut"
    flat = "".join(out.split())
    for value in values:
        assert "".join(value.split()) in flat, (width, value)
    return out


@pytest.mark.parametrize("terminal", WIDTHS, indirect=True)
def test_config_show(terminal: Console, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WIDTHS_TEST_KEY", "sk-not-shown-0123456789")
    path = tmp_path / "unspecific.toml"
    path.write_text(
        '[endpoints.openrouter]\nbase_url = "https://openrouter.ai/api/v1"\n'
        f'model = "{LONG_MODEL}"\napi_key_env = "WIDTHS_TEST_KEY"\nconcurrency = '
        '16\nrequests_per_minute = 600\n'
        "price_prompt_per_mtok = 0.12\nprice_completion_per_mtok = 0.3\n"
        '[roles]\ngenerator = "openrouter"\njudges = ["openrouter"]\nsummarizer = "openrouter"\n'
        'naturalness_judge = "openrouter"\nmodels_under_test = ["openrouter"]\n')
    assert main(["--config", str(path), "config", "show"]) == 0
    out = _fits(terminal, ["https://openrouter.ai/api/v1", LONG_MODEL, "$WIDTHS_TEST_KEY", "600", "0.12",
                           "naturalness_judge"])
    assert "sk-not-shown" not in out


CALL = {"id": 1204, "created_at": "2026-12-03T07:31:00+00:00", "endpoint": "openrouter", "model": LONG_MODEL,
        "template": "constraints_more", "prompt_tokens": 1873, "completion_tokens": 412, "cost": 0.000348,
        "latency_s": 4.213, "run_id": "r1",
        "response": "1. Open with the council's vote [direct] and who cast the deciding ballot, then"}


@pytest.mark.parametrize("terminal", WIDTHS, indirect=True)
def test_cache_list_and_stats(terminal: Console, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from pipeline.llm import cache

    monkeypatch.setattr(cache, "list_calls",
                        lambda *a, **k: [CALL, {**CALL, "id": 1203, "template": "judge_yes_no",
                                                                     "response": "Yes"}])
    stats = {"endpoint": "openrouter", "model": LONG_MODEL, "template": "constraints_more", "calls": 2890,
             "prompt_tokens": 5_412_893, "completion_tokens": 1_190_220, "cost": 1.0064, "bytes": 9_812_334,
             "first": "2026-12-01T09:12:44+00:00", "last": "2026-12-03T07:31:00+00:00"}
    monkeypatch.setattr(cache, "cache_stats", lambda *a, **k: [stats, {**stats, "template": "judge_yes_no"}])
    path = tmp_path / "s.sqlite"
    build_synthetic_store(path, SyntheticSpec(n_instructions=2))
    assert main(["--store", str(path), "cache", "list"]) == 0
    assert main(["--store", str(path), "cache", "stats"]) == 0
    out = _fits(terminal,
                ["1204", "2026-12-03 07:31:00", LONG_MODEL, "constraints_more", "1873", "412", "0.000348",
                           "4.213", "vote [direct] and who", "2890", "5412893", "9812334",
                 "2026-12-01 09:12:44"])
    # The stats' endpoint and model are the same on every row: said once in the title, and the rows
    # keep a table (not stacked a value a line) at every width.
    assert "calls: 2890" not in out and "judge_yes_no" in out


@pytest.mark.parametrize("terminal", WIDTHS, indirect=True)
def test_corpus_list(terminal: Console, tmp_path: Path) -> None:
    path = tmp_path / "s.sqlite"
    build_synthetic_store(path, SyntheticSpec(n_instructions=3))
    assert main(["--store", str(path), "corpus", "list"]) == 0
    out = _fits(terminal, ["news", "synthetic", "kept", "mean", "max"])
    assert out.count("┃ corpus") == 1, out


@pytest.mark.parametrize("terminal", WIDTHS, indirect=True)
def test_corpus_list_of_two_corpora_is_one_table(terminal: Console, tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    # The bundled BBC News set and a second corpus in one domain: one table at 80 columns (the domain
    # column and "all corpora" made it 81 and split it in two), the domain said in its title.
    from pipeline.stages import corpus

    words = {"min": 300, "median": 438, "mean": 473.4, "max": 998}
    counts = {"kept": 1138, "duplicate": 133, "near_duplicate": 27, "too_short": 906, "too_long": 20}
    monkeypatch.setattr(corpus, "corpus_stats", lambda store: [
        corpus.CorpusStats("bbc-news", "news", counts, words),
        corpus.CorpusStats("kaggle", "news", counts, words),
        corpus.CorpusStats("*", "news", {k: 2 * v for k, v in counts.items()}, words)])
    path = tmp_path / "s.sqlite"
    build_synthetic_store(path, SyntheticSpec(n_instructions=2))
    assert main(["--store", str(path), "corpus", "list"]) == 0
    out = _fits(terminal, ["bbc-news", "kaggle", "2276", "1812", "473", "998", "all"])
    assert out.count("┃ corpus") == 1 and "articles of domain news per corpus" in out, out


@pytest.mark.parametrize("terminal", WIDTHS, indirect=True)
def test_build_and_evaluate_summaries(terminal: Console, tmp_path: Path) -> None:
    from pipeline.cli.build_cmd import _print_report
    from pipeline.cli.evaluate_cmd import _print_summary

    usage = Usage(calls=1460, cache_hits=312, prompt_tokens=2_412_093, completion_tokens=603_118, cost=0.7321)
    _print_report(terminal, BuildSummary("build-2026-12-03-news", [], [
        ConditionReport("common", 0, 0, 0, 0, 0, {}, usage),
        ConditionReport("direct", 118, 2, 3, 4602, 1187, {"duplicate_constraint": 14, "off_topic": 3}, usage),
    ], usage, complete=False))
    path = tmp_path / "s.sqlite"
    build_synthetic_store(path, SyntheticSpec(n_instructions=2))
    from pipeline.store.database import open_store

    store = open_store(path)
    try:
        _print_summary(terminal, store, EvaluateSummary(
            {"responses": StageSummary("responses", 240, 236, 0, 4),
             "summaries": StageSummary("summaries", 720, 0, 712, 8)}, run_id="evaluate-2026-12-03-news"))
    finally:
        store.close()
    _fits(terminal, ["common (shared synthesis)", "118 (+3 unfinished)", "1187/4602 (26%)",
                     "17: duplicate_constraint 14, off_topic 3", "1460", "3,015,211", "0.7321", "312",
                     "total (this run)", "responses", "236", "712", "already stored"])


@pytest.mark.parametrize("terminal", WIDTHS, indirect=True)
def test_naturalness_and_dry_run(terminal: Console) -> None:
    from pipeline.cli.common import print_estimate
    from pipeline.cli.evaluate_cmd import _print_win_rates

    iv = Interval(0.634, 0.581, 0.688, 412)
    _print_win_rates(terminal, [WinRate("direct", "single", 412, 240, 42, 130, iv, iv, iv),
                                WinRate("eval", "any", 1236, 700, 80, 456, iv, iv, iv)])
    estimate = Estimate("evaluate",
                        {"openrouter": EndpointEstimate("openrouter", 12_480, 31_204_882, 4_112_903,
                                                                    1_024, 7.4112, 3.7056, 5_412.0)})
    print_estimate(terminal, estimate)
    _fits(terminal,
          [iv.fmt(), "1236", "456", "12,480", "31,204,882", "4,112,903", "7.4112", "3.7056", "90.2 min"])


@pytest.mark.parametrize("terminal", [80], indirect=True)
def test_headers_wrap_between_words_before_a_table_splits(terminal: Console) -> None:
    """Three corrected rates with intervals fit 80 columns as one table once their headers wrap
    ("superficial corr." over two lines): they are not split one value a table."""
    sheet = Sheet("corrected", ("condition", "model"),
                  (Block("", ("Org corr.", "Core@0.25 corr.", "superficial corr.")),))
    sheet.add("single", "local [direct]", ("79.7", "[46.8, 100.0]"), ("47.9", "[22.3, 71.9]"),
              ("1.6", "[0.0, 30.9]"))
    render_sheet(terminal, sheet)
    out = _fits(terminal, ["local [direct]", "79.7", "[46.8, 100.0]", "[0.0, 30.9]"])
    assert out.count("┏") == 1 and "superficial" in out and "corr." in out


@pytest.mark.parametrize("terminal", [80], indirect=True)
def test_rows_stack_where_the_keys_alone_are_too_wide(terminal: Console) -> None:
    long = "x" * 70
    sheet = Sheet("stacked", ("endpoint", "model"), (Block("", ("calls", "cost")),))
    sheet.add("openrouter", long, "12", "0.5")
    render_sheet(terminal, sheet)
    out = _fits(terminal, [long, "calls: 12", "cost: 0.5"])
    assert "┏" not in out


@pytest.mark.parametrize("terminal", WIDTHS, indirect=True)
def test_prompt_tokens_cached_by_the_endpoint_when_one_said(terminal: Console, tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """The prompt tokens an endpoint read from its own prompt cache: a column of the cache's list and stats
    and of the build summary, and the cached price in the config, once any call or endpoint has one."""
    from pipeline.cli.build_cmd import _print_report
    from pipeline.llm import cache

    calls = [{**CALL, "cached_prompt_tokens": 1536}, {**CALL, "id": 1203, "cached_prompt_tokens": None}]
    monkeypatch.setattr(cache, "list_calls", lambda *a, **k: calls)
    stats = {"endpoint": "openrouter", "model": LONG_MODEL, "template": "constraints_more", "calls": 2890,
             "prompt_tokens": 5_412_893, "cached_prompt_tokens": 3_871_204, "completion_tokens": 1_190_220,
             "cost": 1.0064, "bytes": 9_812_334, "first": "2026-12-01T09:12:44+00:00",
             "last": "2026-12-03T07:31:00+00:00"}
    monkeypatch.setattr(cache, "cache_stats", lambda *a, **k: [stats])
    path = tmp_path / "s.sqlite"
    build_synthetic_store(path, SyntheticSpec(n_instructions=2))
    assert main(["--store", str(path), "cache", "list"]) == 0
    assert main(["--store", str(path), "cache", "stats"]) == 0
    usage = Usage(calls=1460, cache_hits=312, prompt_tokens=2_412_093, completion_tokens=603_118, cost=0.7321,
                  cached_prompt_tokens=1_804_310, cached_reported=1400)
    _print_report(terminal, BuildSummary("build-2026-12-03-news", [], [
        ConditionReport("common", 0, 0, 0, 0, 0, {}, Usage(calls=3, prompt_tokens=900, completion_tokens=80)),
        ConditionReport("direct", 118, 2, 3, 4602, 1187, {"duplicate_constraint": 14}, usage),
    ], usage, complete=False))
    config = tmp_path / "c.toml"
    config.write_text('[endpoints.gpt]\nbase_url = "https://api.openai.com/v1"\nmodel = "gpt-4o-mini"\n'
                      "price_prompt_per_mtok = 0.15\nprice_cached_prompt_per_mtok = 0.075\n"
                      "price_completion_per_mtok = 0.6\n"
                      '[roles]\ngenerator = "gpt"\njudges = ["gpt"]\nsummarizer = "gpt"\n'
                      'models_under_test = ["gpt"]\n')
    assert main(["--config", str(config), "config", "show"]) == 0
    _fits(terminal, ["1536", "3871204", "5412893", "1,804,310", "0.075", "0.15"])


@pytest.mark.parametrize("columns", [None, 60])
def test_piped_tables_fit_columns_else_100(tmp_path: Path, capsys: pytest.CaptureFixture,
                                           monkeypatch: pytest.MonkeyPatch, columns: int | None) -> None:
    """Piped (not a terminal), a command's tables are laid out as in a terminal as wide as COLUMNS, else
    100 columns (Rich's own default is 80; the report's tables used to print unwrapped)."""
    if columns is None:
        monkeypatch.delenv("COLUMNS", raising=False)
    else:
        monkeypatch.setenv("COLUMNS", str(columns))
    assert common.console().width == (columns or common.PIPED_WIDTH)
    monkeypatch.setenv("WIDTHS_TEST_KEY", "sk-not-shown-0123456789")
    path = tmp_path / "unspecific.toml"
    path.write_text(f'[endpoints.openrouter]\nbase_url = '
                    f'"https://openrouter.ai/api/v1"\nmodel = "{LONG_MODEL}"\n'
                    'api_key_env = "WIDTHS_TEST_KEY"\n[roles]\ngenerator = '
                    '"openrouter"\njudges = ["openrouter"]\n')
    assert main(["--config", str(path), "config", "show"]) == 0
    store = tmp_path / "s.sqlite"
    build_synthetic_store(store, SyntheticSpec(n_instructions=3))
    assert main(["--store", str(store), "corpus", "list"]) == 0
    out = capsys.readouterr().out
    assert max(map(len, out.splitlines())) <= (columns or 100) and LONG_MODEL in out and "synthetic" in out
