"""The reviewers' validation protocol (pipeline.analysis.validation) checked with scripted annotators.

A synthetic store gives about 350 flipped and 470 passed-both items over three domains. A
hidden truth decides, per item, whether a constraint really is superficial; scripted
annotators label the plan: ``oracle`` copies the truth, ``noisy`` is wrong on exactly 20% of
the items. The truth over the whole population gives the values the report must find: the
oracle's intervals must contain them, the noisy annotator's precision must move to where 20%
errors put it, kappa between the two must be what their 2x2 table implies, and the pass/fail
lines must flip between a good and a bad metric.
"""

from __future__ import annotations

import csv
import math
import random
from collections.abc import Iterator
from pathlib import Path

import pytest

from pipeline.analysis.metrics import constraint_items
from pipeline.analysis.validation import ADJUDICATOR, validation_report
from pipeline.analysis.validation_plan import PASSED_STRATUM, ValidationError, draw_plan, load_plan, save_plan
from pipeline.analysis.validation_sheets import (
    SHEET_COLUMNS,
    disagreements,
    import_sheets,
    sheet_rows,
    write_sheet,
)
from pipeline.cli import main
from pipeline.store.database import Store
from tests.fakes.synthetic import SyntheticSpec, build_synthetic_store
from tests.support.store_copy import open_copy

GOOD = (0.95, 0.01)  # share truly superficial among flipped / among passed-both items
BAD = (0.70, 0.15)


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("validation") / "store.sqlite"
    build_synthetic_store(path, SyntheticSpec(n_instructions=12, ratios=(0.5, 0.25, 0.1), seed=3))
    return path


@pytest.fixture
def store(base: Path, tmp_path: Path) -> Iterator[Store]:
    yield from open_copy(base, tmp_path)


def truly_superficial(key: tuple[int, int], flipped: bool, rates: tuple[float, float]) -> bool:
    """The hidden truth: a fixed coin per item, its bias set by the metric's call."""
    return random.Random(key[0] * 100_003 + key[1]).random() < (rates[0] if flipped else rates[1])


def population_truth(store: Store, rates: tuple[float, float]) -> tuple[float, float]:
    """Precision and recall of the metric over every item in scope, by the hidden truth."""
    items = {(i.constraint_id, i.response_id): i for i in constraint_items(store, ratio=0.25)}
    tp = fp = fn = 0
    for key, item in items.items():
        if not (item.flipped or item.passed_both):
            continue
        truth = truly_superficial(key, item.flipped, rates)
        tp += item.flipped and truth
        fp += item.flipped and not truth
        fn += (not item.flipped) and truth
    return tp / (tp + fp), tp / (tp + fn)


def label(store: Store, annotator: str, labels: dict[tuple[int, int], str]) -> None:
    store.conn.executemany("INSERT OR REPLACE INTO annotations(constraint_id, "
                           "generation_id, annotator, label)"
                           " VALUES (?, ?, ?, ?)", [(c, r, annotator, lab) for (c, r), lab in labels.items()])
    store.commit()


def script(store: Store, rates: tuple[float, float], *, wrong: float = 0.0, seed: int = 7) -> dict:
    """Labels of a scripted annotator on the newest plan: the truth, with exactly ``wrong`` of
    the items turned to the other label."""
    plan = load_plan(store)
    truth = {(p.constraint_id, p.response_id): truly_superficial((p.constraint_id, p.response_id),
                                                                 p.stratum != PASSED_STRATUM, rates)
             for p in plan.items}
    keys = sorted(truth)
    flip = set(random.Random(seed).sample(keys, round(wrong * len(keys))))
    return {k: ("superficial" if truth[k] != (k in flip) else "integrated") for k in keys}


def planned(store: Store, **kw) -> None:
    save_plan(store, draw_plan(store, **kw))


# -- the plan ----------------------------------------------------------------------------------


def test_plan_is_stratified_seeded_and_stored(store: Store) -> None:
    plan = draw_plan(store, seed=1)
    strata = {s.name: s for s in plan.strata}
    assert set(strata) == {"flipped:news", "flipped:story", "flipped:blog", PASSED_STRATUM}
    assert all(s.drawn == 50 and s.population > 50 for s in strata.values())
    assert len(plan.items) == 200 and len({(p.constraint_id, p.response_id) for p in plan.items}) == 200
    # Each stratum holds what its name says, by the one flipped rule.
    items = {(i.constraint_id, i.response_id): i for i in constraint_items(store, ratio=0.25)}
    for p in plan.items:
        item = items[(p.constraint_id, p.response_id)]
        assert (item.flipped, item.passed_both) == ((True, False) if p.stratum != PASSED_STRATUM
                                                    else (False, True))
        assert p.stratum == PASSED_STRATUM or p.stratum == f"flipped:{p.domain}"
    # Shuffled together: the first 50 positions are not one stratum.
    assert len({p.stratum for p in plan.items[:50]}) == 4
    assert draw_plan(store, seed=1).items == plan.items
    assert draw_plan(store, seed=2).items != plan.items
    stored = save_plan(store, plan)
    again = load_plan(store)
    assert again.items == plan.items and again.strata == plan.strata and again.created_at == stored.created_at
    with pytest.raises(ValidationError, match="exists"):
        save_plan(store, plan)
    save_plan(store, draw_plan(store, seed=2), replace=True)
    assert load_plan(store, "default").seed == 2


def test_plan_options_and_shortfall(store: Store) -> None:
    plan = draw_plan(store, per_domain=500, passed=3, domains=["news"], name="n")
    assert {s.name: (s.drawn, s.population) for s in plan.strata}["flipped:news"][0] == \
        {s.name: s.population for s in plan.strata}["flipped:news"]
    assert [s.name for s in plan.shortfalls] == ["flipped:news"]
    assert {p.domain for p in plan.items} == {"news"}
    assert sum(p.stratum == PASSED_STRATUM for p in plan.items) == 3
    with pytest.raises(ValidationError, match="poetry"):
        draw_plan(store, domains=["poetry"])
    with pytest.raises(ValidationError, match="nothing to sample"):
        draw_plan(store, ratio=0.3)


# -- scripted annotators -----------------------------------------------------------------------


def test_oracle_finds_the_population_values_and_passes_a_good_metric(store: Store) -> None:
    planned(store)
    label(store, "oracle", script(store, GOOD))
    precision, recall = population_truth(store, GOOD)
    report = validation_report(store, annotator="oracle")
    assert (report.labelled == 200
            and report.ties == report.ambiguous == report.out_of_scope == report.changed == 0)
    assert report.precision.contains(precision) and report.recall.contains(recall)
    assert report.integrated.contains(1 - precision)
    assert report.integrated.value == pytest.approx(1 - report.precision.value)  # labels are only S or I
    assert [c.passed for c in report.criteria] == [True, True, True] and report.passed
    # Unweighted, the 50 passed-both items stand for themselves, not for their 470: recall would
    # be overstated. The weighted estimate is below it whenever a superficial item was missed.
    assert report.fn > 0 and report.recall.value < report.tp / (report.tp + report.fn)


def test_oracle_fails_a_bad_metric(store: Store) -> None:
    planned(store)
    label(store, "oracle", script(store, BAD))
    precision, recall = population_truth(store, BAD)
    report = validation_report(store, annotator="oracle")
    assert report.precision.contains(precision) and report.recall.contains(recall)
    assert precision < 0.8 and recall < 0.8
    assert [c.passed for c in report.criteria] == [False, False, False] and not report.passed
    # Unweighted, these very labels would pass recall: the protocol's weights are what fail it.
    assert report.tp / (report.tp + report.fn) > 0.8 > recall
    # Precision and the integrated share rest on 150 flipped items: far enough from their bars to
    # be sure. Recall rests on the few superficial items among 50 passed-both ones, each standing
    # for about 9: its interval is wide, and the report says it straddles the bar.
    precision_c, recall_c, integrated_c = report.criteria
    assert precision_c.certain and integrated_c.certain
    assert recall_c.value.high - recall_c.value.low > precision_c.value.high - precision_c.value.low


def test_an_annotator_wrong_on_a_fifth_moves_the_numbers_where_they_must(store: Store) -> None:
    planned(store)
    oracle, noisy = script(store, GOOD), script(store, GOOD, wrong=0.2)
    assert sum(oracle[k] != noisy[k] for k in oracle) == 40
    label(store, "oracle", oracle)
    label(store, "noisy", noisy)
    precision, _ = population_truth(store, GOOD)
    report = validation_report(store, annotator="noisy")
    # Among flipped items, the noisy annotator says superficial for a true one 80% of the time
    # and for a false one 20%: expected precision 0.8 p + 0.2 (1 - p), just under the bar.
    expected = 0.8 * precision + 0.2 * (1 - precision)
    assert report.precision.contains(expected) and not report.precision.contains(precision)
    assert not report.criteria[0].passed and not report.criteria[2].passed
    # Kappa between them: exactly 80% agreement; chance agreement from their marginals.
    ((kappa),) = validation_report(store).kappas
    keys = sorted(oracle)
    q = sum(oracle[k] == "superficial" for k in keys) / len(keys)
    qn = sum(noisy[k] == "superficial" for k in keys) / len(keys)
    p_e = q * qn + (1 - q) * (1 - qn)
    assert kappa.kappa.n == 200 and kappa.percent == pytest.approx(0.8)
    assert kappa.kappa.value == pytest.approx((0.8 - p_e) / (1 - p_e))
    assert kappa.kappa.low < kappa.kappa.value < kappa.kappa.high
    # Two annotators: the 40 items they split on are ties, left out of the consensus.
    consensus = validation_report(store)
    assert consensus.ties == 40 and consensus.labelled == 160


def test_two_oracles_agree_perfectly(store: Store) -> None:
    planned(store)
    labels = script(store, GOOD)
    label(store, "a", labels)
    label(store, "b", {k: v for i, (k, v) in enumerate(sorted(labels.items())) if i % 2})  # half the items
    ((kappa),) = validation_report(store).kappas
    assert kappa.kappa.n == 100 and kappa.kappa.value == pytest.approx(1.0) and kappa.percent == 1.0


def test_ambiguous_and_changed_items(store: Store) -> None:
    planned(store)
    plan = load_plan(store)
    labels = script(store, GOOD)
    first = plan.items[0]
    labels[(first.constraint_id, first.response_id)] = "ambiguous"
    label(store, "oracle", labels)
    report = validation_report(store, annotator="oracle")
    assert report.ambiguous == 1 and report.tp + report.fp + report.fn + report.tn == 199
    # The judges change their mind on one flipped item: the report uses the current call, and says so.
    flipped = next(p for p in plan.items[1:] if p.stratum != PASSED_STRATUM)
    store.conn.execute("UPDATE verdicts SET verdict = 1 WHERE generation_id = ? AND constraint_id = ?",
                       (flipped.summary_id, flipped.constraint_id))
    store.commit()
    assert validation_report(store, annotator="oracle").changed == 1


def test_depth_profile(store: Store) -> None:
    # Label every item flipped at any ratio: the profile's share is then exactly the labelled share.
    labels = {}
    for ratio in (0.5, 0.25, 0.1):
        for item in constraint_items(store, ratio=ratio):
            if item.flipped:
                labels[(item.constraint_id, item.response_id)] = (
                    "superficial" if (item.constraint_id + ratio * 10) % 3 else "integrated")
    label(store, "oracle", labels)
    planned(store)
    profile = validation_report(store, annotator="oracle").profile
    assert [p.ratio for p in profile] == [0.5, 0.25, 0.1]
    for point in profile:
        flipped = {(i.constraint_id, i.response_id)
                   for i in constraint_items(store, ratio=point.ratio) if i.flipped}
        assert point.flipped == len(flipped) == point.labelled > 0
        share = sum(labels[k] == "superficial" for k in flipped) / len(flipped)
        assert point.superficial.value == pytest.approx(share) and point.superficial.contains(share)


# -- sheets ------------------------------------------------------------------------------------


def test_sheet_hides_the_judges_and_round_trips(store: Store, tmp_path: Path) -> None:
    planned(store, per_domain=4, passed=4)
    plan = load_plan(store)
    rows = sheet_rows(store, plan, annotator="ann")
    assert len(rows) == 16 and list(rows[0]) == list(SHEET_COLUMNS)
    assert all(row["response"] and row["summary"] and row["constraint"] for row in rows)
    sheet = tmp_path / "ann.csv"
    write_sheet(rows, sheet)
    text = sheet.read_text()
    # Nothing a judge said, nor the stratum that would give the metric's call away.
    assert not any(word in text.splitlines()[0]
                   for word in ("verdict", "quote", "flipped", "stratum", "score"))
    assert "flipped:" not in text and "passed" not in text.splitlines()[0]
    filled = list(csv.DictReader(sheet.open()))
    for k, row in enumerate(filled):
        row["label"] = ("superficial", "i", "Ambiguous", "")[k % 4]
    _write(sheet, filled)
    result = import_sheets(store, [sheet])
    assert result.errors == [] and result.saved == 12 and result.blank == 4 and result.annotators == {"ann"}
    stored = dict(((c, g), lab) for c, g, lab in store.conn.execute(
        "SELECT constraint_id, generation_id, label FROM annotations WHERE annotator = 'ann'"))
    assert stored[(int(filled[1]["constraint_id"]), int(filled[1]["response_id"]))] == "integrated"
    assert stored[(int(filled[2]["constraint_id"]), int(filled[2]["response_id"]))] == "ambiguous"
    # Exported again, the sheet carries the person's labels so far.
    assert [r["label"] for r in sheet_rows(store, plan, annotator="ann")][:4] == \
        ["superficial", "integrated", "ambiguous", ""]


def test_bad_rows_are_named_and_nothing_is_saved(store: Store, tmp_path: Path) -> None:
    planned(store, per_domain=2, passed=2)
    rows = sheet_rows(store, load_plan(store), annotator="ann")
    rows[0]["label"] = "deep"
    rows[1]["label"] = "s"
    rows[1]["annotator"] = ""
    rows[2]["label"] = "i"
    rows[2]["response_id"] = 999_999
    rows[3]["label"] = "s"
    rows[4]["label"] = "superficial"
    rows.append({**rows[4], "label": "integrated"})  # the same person, the same item, another label
    sheet = tmp_path / "bad.csv"
    write_sheet(rows, sheet)
    result = import_sheets(store, [sheet])
    assert [(e.line, e.message.split()[0]) for e in result.errors] == [(2, "label"), (3, "no"),
                                                                       (4, "item"), (10, "ann")]
    assert "deep" in str(result.errors[0]) and str(result.errors[0]).startswith("bad.csv:2:")
    assert store.conn.execute("SELECT count(*) FROM annotations").fetchone()[0] == 0


def test_two_sheets_merge_and_disagreements_go_to_adjudication(store: Store, tmp_path: Path) -> None:
    planned(store, per_domain=2, passed=2)
    plan = load_plan(store)
    sheets = []
    for who, flip in (("ann1", ()), ("ann2", (0, 3))):
        rows = sheet_rows(store, plan, annotator=who)
        for k, row in enumerate(rows):
            row["label"] = "superficial" if (k % 2 == 0) != (k in flip) else "integrated"
        sheets.append(tmp_path / f"{who}.csv")
        write_sheet(rows, sheets[-1])
    result = import_sheets(store, sheets)
    assert result.errors == [] and result.saved == 16 and result.annotators == {"ann1", "ann2"}
    split = disagreements(store, plan)
    assert [d.item.position for d in split] == [1, 4]
    assert split[0].labels == {"ann1": "superficial", "ann2": "integrated"}
    assert validation_report(store, plan).ties == 2
    # The adjudication sheet: the two labels shown, the adjudicator's label settles the item.
    out = tmp_path / "adjudicate.csv"
    assert main(["--store", str(store.path), "validate", "disagreements", "--out", str(out)]) == 0
    rows = list(csv.DictReader(out.open()))
    assert [r["item"] for r in rows] == ["1", "4"] and rows[0]["label_ann2"] == "integrated"
    assert {r["annotator"] for r in rows} == {ADJUDICATOR}
    rows[0]["label"], rows[1]["label"] = "integrated", "superficial"
    _write(out, rows)
    assert main(["--store", str(store.path), "validate", "import", str(out)]) == 0
    assert disagreements(store, plan) == []
    report = validation_report(store, plan)
    assert report.ties == 0 and report.labelled == 8
    # The adjudicator is not a rater: one pair of annotators, over the 8 items.
    assert [(k.annotator_a, k.annotator_b, k.kappa.n) for k in report.kappas] == [("ann1", "ann2", 8)]


def _write(path: Path, rows: list[dict]) -> None:
    with path.open("w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)


# -- the command line --------------------------------------------------------------------------


def test_cli(store: Store, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import json

    path = str(store.path)
    assert main(["--store", path, "validate", "report"]) == 2
    assert "validate plan" in capsys.readouterr().err
    assert main(["--store", path, "validate", "plan", "--per-domain", "10", "--passed", "5",
                 "--seed", "4"]) == 0
    assert "flipped:news" in capsys.readouterr().out
    assert main(["--store", path, "validate", "plan"]) == 2  # exists: never redrawn by accident
    sheet = tmp_path / "s.csv"
    assert main(["--store", path, "validate", "export", "--out", str(sheet), "--annotator", "oracle"]) == 0
    rows = list(csv.DictReader(sheet.open()))
    assert len(rows) == 35
    labels = script(store, GOOD)
    for row in rows:
        row["label"] = labels[(int(row["constraint_id"]), int(row["response_id"]))]
    _write(sheet, rows)
    capsys.readouterr()
    assert main(["--store", path, "validate", "import", str(sheet)]) == 0
    assert "saved 35 labels from oracle" in capsys.readouterr().out
    assert main(["--store", path, "validate", "report", "--json", "--resamples", "200"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["labelled"] == 35 and [c["name"] for c in data["criteria"]][0] == "precision of superficial"
    assert data["depth_profile"][1]["ratio"] == 0.25 and data["annotators"] == []
    assert main(["--store", path, "validate", "report"]) == 0
    out = capsys.readouterr().out
    assert "PASS" in out or "FAIL" in out
    assert not math.isnan(data["criteria"][0]["value"])


@pytest.mark.parametrize("width", [80, 120, 160])
def test_the_report_reads_at_every_width(store: Store, tmp_path: Path, width: int,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """`validate report` at 80, 120 and 160 columns: its criteria and depth profile are tables that fit,
    each value whole (a criterion's line ran past 80 columns and wrapped under its name)."""
    import io

    from rich.console import Console

    from pipeline.cli import common

    console = Console(width=width, force_terminal=True, color_system=None, record=True, file=io.StringIO())
    monkeypatch.setattr(common, "console", lambda: console)
    path = str(store.path)
    assert main(["--store", path, "validate", "plan", "--per-domain", "10", "--passed", "5",
                 "--seed", "4"]) == 0
    for annotator, wrong in (("oracle", 0.1), ("second-annotator", 0.2)):  # two: their agreement's table
        sheet = tmp_path / f"{annotator}.csv"
        assert main(["--store", path, "validate", "export", "--out", str(sheet), "--annotator",
                     annotator]) == 0
        rows = list(csv.DictReader(sheet.open()))
        labels = script(store, BAD, wrong=wrong, seed=len(annotator))
        for row in rows:
            row["label"] = labels[(int(row["constraint_id"]), int(row["response_id"]))]
        _write(sheet, rows)
        assert main(["--store", path, "validate", "import", str(sheet)]) == 0
    console.export_text()  # what came before the report
    assert main(["--store", path, "validate", "report", "--resamples", "200"]) == 0
    out = console.export_text()
    assert all(len(line) <= width for line in out.splitlines())
    report = validation_report(store, n_resamples=200)
    flat = " ".join(out.split())
    for c in report.criteria:
        line = next(line for line in out.splitlines() if c.name in line)
        assert f"{100 * c.value.value:.1f}" in line, (c.name, line)  # its value on its own line
        assert ("PASS" if c.passed and not math.isnan(c.value.value) else "FAIL") in flat
    # The '?' is explained under the table exactly when a verdict carries one.
    uncertain = any(not c.certain and not math.isnan(c.value.value) for c in report.criteria)
    assert ("the interval straddles the bar" in flat) == uncertain
    for point in report.profile:
        assert f"{point.ratio:g}" in flat and str(point.flipped) in flat
    kappa = report.kappas[0].kappa
    assert "second-annotator" in flat and f"{kappa.value:.2f}" in flat
    assert f"[{kappa.low:.2f}, {kappa.high:.2f}]" in flat
