"""The judges against people (pipeline.analysis.judge_validation), with scripted people of known accuracy.

In the synthetic store, judge-a and judge-b disagree on some items. A person who copies judge-a
makes judge-a exact (accuracy, precision, recall and kappa 1) and judge-b as good as its
agreement with judge-a, which the store's own 2x2 counts give; a person wrong on exactly 20% of
the items puts judge-a's accuracy at 0.8 exactly, inside its interval.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path

import pytest

from pipeline.analysis.judge_validation import (
    describe,
    draw_judge_plan,
    judge_scores,
    judge_validation_by_name,
    load_judge_plan,
    save_judge_plan,
)
from pipeline.analysis.validation import ADJUDICATOR
from pipeline.analysis.validation_plan import ValidationError
from pipeline.cli import main
from pipeline.outputs.report import ReportOptions, build_report, render
from pipeline.store.database import Store
from pipeline.store.validation import save_text_label
from tests.fakes.synthetic import SyntheticSpec, build_synthetic_store
from tests.support.store_copy import open_copy


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("judges") / "store.sqlite"
    build_synthetic_store(path, SyntheticSpec(n_instructions=12, seed=3))
    return path


@pytest.fixture
def store(base: Path, tmp_path: Path) -> Iterator[Store]:
    yield from open_copy(base, tmp_path)


def verdicts_of(store: Store, judge: str) -> dict[tuple[int, int], int]:
    return {(c, g): y for c, g, y in store.conn.execute(
        "SELECT constraint_id, generation_id, verdict FROM verdicts WHERE judge = ? AND verdict IS NOT NULL"
        " ORDER BY id", (judge,))}


def overall(store: Store, **kw) -> dict:
    return judge_validation_by_name(judge_scores(store, **kw))


def test_plan_strata_by_domain_and_text_kind(store: Store) -> None:
    plan = draw_judge_plan(store, per_stratum=10, seed=2)
    assert set(plan.strata) == {f"{d}/{k}" for d in ("news", "story", "blog")
                                for k in ("response", "summary")}
    assert all(drawn == 10 for _, drawn in plan.strata.values()) and len(plan.items) == 60
    kinds = dict(store.conn.execute("SELECT id, kind FROM generations"))
    assert all(kinds[i.generation_id] == i.text_kind for i in plan.items)
    assert draw_judge_plan(store, per_stratum=10, seed=2).items == plan.items
    save_judge_plan(store, plan)
    assert load_judge_plan(store).items == plan.items
    with pytest.raises(ValidationError, match="exists"):
        save_judge_plan(store, plan)


def test_a_person_copying_one_judge(store: Store) -> None:
    save_judge_plan(store, draw_judge_plan(store, per_stratum=25, seed=1))
    plan = load_judge_plan(store)
    a, b = verdicts_of(store, "judge-a"), verdicts_of(store, "judge-b")
    for i in plan.items:
        save_text_label(store, i.constraint_id, i.generation_id, "copy",
                        a[(i.constraint_id, i.generation_id)])
    scores = overall(store, n_resamples=300)
    sa, sb = scores["judge-a"], scores["judge-b"]
    assert sa.n == 150 and sa.accuracy.value == sa.precision.value == sa.recall.value == sa.kappa.value == 1.0
    assert sa.yes_bias == 0.0
    # judge-b against the person = judge-b against judge-a on these items, counted by hand.
    keys = [(i.constraint_id, i.generation_id) for i in plan.items]
    agree = sum(a[k] == b[k] for k in keys) / len(keys)
    tp = sum(a[k] and b[k] for k in keys)
    assert sb.accuracy.value == pytest.approx(agree) and 0 < agree < 1
    assert sb.precision.value == pytest.approx(tp / sum(b[k] for k in keys))
    assert sb.recall.value == pytest.approx(tp / sum(a[k] for k in keys))
    assert sb.yes_bias == pytest.approx((sum(b[k] for k in keys) - sum(a[k] for k in keys)) / len(keys))
    assert sb.accuracy.low < sb.accuracy.value < sb.accuracy.high
    # Per domain and text kind: the groups partition the items.
    by = [s for s in judge_scores(store, n_resamples=100) if s.judge == "judge-b"]
    assert sum(s.n for s in by if s.by == "domain") == sum(s.n for s in by if s.by == "text") == 150
    assert {s.by for s in by} == {"all", "domain", "text", "position", "length"}


def test_a_person_wrong_on_a_fifth(store: Store) -> None:
    save_judge_plan(store, draw_judge_plan(store, per_stratum=25, seed=1))
    plan = load_judge_plan(store)
    a = verdicts_of(store, "judge-a")
    wrong = set(random.Random(4).sample(range(len(plan.items)), 30))  # exactly 20% of 150
    for k, i in enumerate(plan.items):
        truth = a[(i.constraint_id, i.generation_id)]
        save_text_label(store, i.constraint_id, i.generation_id, "noisy", truth
                        if k not in wrong else 1 - truth)
    sa = overall(store, n_resamples=1000)["judge-a"]
    assert sa.accuracy.value == pytest.approx(0.8) and sa.accuracy.contains(0.8)
    assert 0.7 < sa.accuracy.low < 0.8 < sa.accuracy.high < 0.9
    assert sa.kappa.value < 0.8 and sa.kappa.contains(sa.kappa.value)


def test_missing_verdicts_do_not_count_and_the_adjudicator_settles(store: Store) -> None:
    save_judge_plan(store, draw_judge_plan(store, per_stratum=2, seed=1))
    plan = load_judge_plan(store)
    first, second = plan.items[0], plan.items[1]
    a = verdicts_of(store, "judge-a")
    for i in plan.items:
        save_text_label(store, i.constraint_id, i.generation_id, "p", a[(i.constraint_id, i.generation_id)])
    # judge-a's verdict on the first item goes missing (a newer, unanswered judging): that item
    # no longer counts for judge-a, and certainly not as a No.
    store.conn.execute("INSERT INTO verdicts(generation_id, constraint_id, judge, judging_mode, "
                       "prompt_hash, verdict)"
                       " VALUES (?, ?, 'judge-a', 'batched', 'newer', NULL)",
                       (first.generation_id, first.constraint_id))
    store.conn.execute("UPDATE verdicts SET verdict = NULL WHERE judge = 'judge-a' AND generation_id = ?"
                       " AND constraint_id = ?", (first.generation_id, first.constraint_id))
    store.commit()
    assert overall(store, n_resamples=50)["judge-a"].n == len(plan.items) - 1
    # Two people split on the second item: left out; an adjudicator settles it.
    k = (second.constraint_id, second.generation_id)
    save_text_label(store, *k, "q", 1 - a[k])
    assert overall(store, n_resamples=50)["judge-a"].n == len(plan.items) - 2
    save_text_label(store, *k, ADJUDICATOR, a[k])
    assert overall(store, n_resamples=50)["judge-a"].n == len(plan.items) - 1
    with pytest.raises(ValueError, match="not a response or a summary"):
        save_text_label(store, first.constraint_id, 999_999, "p", True)


def test_report_names_validated_and_unvalidated_judges(store: Store,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    report = build_report(store, ReportOptions(n_resamples=100, copy=False))
    assert report.judges_validated == {}
    assert "judge-a: unvalidated" in describe("judge-a", report.judges_validated)
    save_judge_plan(store, draw_judge_plan(store, per_stratum=5, seed=1))
    a = verdicts_of(store, "judge-a")
    for i in load_judge_plan(store).items:
        save_text_label(store, i.constraint_id, i.generation_id, "copy",
                        a[(i.constraint_id, i.generation_id)])
    report = build_report(store, ReportOptions(n_resamples=100, copy=False))
    assert set(report.judges_validated) == {"judge-a", "judge-b"}
    from rich.console import Console

    console = Console(record=True, width=200)
    render(report, console)
    out = " ".join(console.export_text().split())
    assert "judge-a: accuracy 100.0" in out and "n=30" in out
    assert describe("judge-a [batched]", report.judges_validated).startswith("judge-a [batched]: accuracy")
    import json

    from pipeline.outputs.report import write_outputs

    write_outputs(report, store.path.parent / "out")
    saved = json.loads((store.path.parent / "out" / "report.json").read_text())["judge_validation"]
    assert saved["judge-a"]["accuracy"] == 1.0 and saved["judge-a"]["n"] == 30


def test_cli(store: Store, capsys: pytest.CaptureFixture[str]) -> None:
    import json

    path = str(store.path)
    assert main(["--store", path, "validate", "judges"]) == 2
    assert main(["--store", path, "validate", "judge-plan", "--by", "domain", "--per-stratum", "3"]) == 0
    assert "news/summary" in capsys.readouterr().out
    assert main(["--store", path, "validate", "judges"]) == 0
    assert "no answers yet" in capsys.readouterr().out
    a = verdicts_of(store, "judge-a")
    for i in load_judge_plan(store).items:
        save_text_label(store, i.constraint_id, i.generation_id, "copy",
                        a[(i.constraint_id, i.generation_id)])
    assert main(["--store", path, "validate", "judges", "--json", "--resamples", "50"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert {(r["judge"], r["n"]) for r in rows if r["by"] == "all"} == {("judge-a", 18), ("judge-b", 18)}


def test_judge_sheets_round_trip(store: Store, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import csv

    path = str(store.path)
    assert main(["--store", path, "validate", "judge-plan", "--by", "domain", "--per-stratum", "2"]) == 0
    sheet = tmp_path / "answers.csv"
    assert main(["--store", path, "validate", "export", "--judges", "--out", str(sheet),
                 "--annotator", "ann"]) == 0
    rows = list(csv.DictReader(sheet.open()))
    assert len(rows) == 12 and all(r["text"] and r["constraint"] for r in rows)
    header = sheet.read_text().splitlines()[0]
    assert not any(word in header for word in ("verdict", "quote", "judge-a"))
    a = verdicts_of(store, "judge-a")
    rows[0]["answer"] = "maybe"
    for r in rows[1:]:
        r["answer"] = "y" if a[(int(r["constraint_id"]), int(r["text_id"]))] else "No"
    rows[-1]["answer"] = ""
    with sheet.open("w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    capsys.readouterr()
    assert main(["--store", path, "validate", "import", str(sheet)]) == 2
    err = capsys.readouterr().err
    assert "answers.csv:2: answer 'maybe'" in err and "nothing saved" in err
    assert overall(store, n_resamples=20) == {}
    rows[0]["answer"] = "yes" if a[(int(rows[0]["constraint_id"]), int(rows[0]["text_id"]))] else "no"
    with sheet.open("w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    assert main(["--store", path, "validate", "import", str(sheet)]) == 0
    assert ("saved 11 answers from ann (1 rows without one skipped)"
            in " ".join(capsys.readouterr().out.split()))
    score = overall(store, n_resamples=20)["judge-a"]
    assert score.n == 11 and score.accuracy.value == 1.0


def test_bad_judge_sheet_rows_are_named_and_nothing_is_saved(store: Store, tmp_path: Path) -> None:
    import csv

    from pipeline.analysis.judge_validation import JUDGE_SHEET_COLUMNS, import_judge_sheets, judge_sheet_rows

    save_judge_plan(store, draw_judge_plan(store, per_stratum=2, seed=1))
    plan = load_judge_plan(store)
    rows = judge_sheet_rows(store, plan, annotator="ann")
    rows[0]["answer"] = "maybe"
    rows[1].update(answer="y", annotator="")
    rows[2].update(answer="n", text_id=999_999)
    rows[3].update(answer="1", item="third")
    rows[4]["answer"] = "yes"
    rows.append({**rows[4], "answer": "no"})  # the same person, the same item, the other answer
    sheet = tmp_path / "bad.csv"
    with sheet.open("w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, fieldnames=JUDGE_SHEET_COLUMNS)
        writer.writeheader()
        writer.writerows(rows)
    result = import_judge_sheets(store, [sheet])
    third = plan.items[2]
    assert [str(e) for e in result.errors] == [
        "bad.csv:2: answer 'maybe' is not yes or no (or y, n, 1, 0)",
        "bad.csv:3: no annotator: fill the annotator column or pass --annotator",
        f"bad.csv:4: item {third.position} (constraint {third.constraint_id}, text 999999) is not in judge "
        f"plan {plan.name!r}",
        "bad.csv:5: item, constraint_id and text_id must be whole numbers",
        f"bad.csv:{len(rows) + 1}: ann answers item {plan.items[4].position} both yes and no (bad.csv:6)",
    ]
    assert result.saved == 0 and result.blank == len(rows) - 6
    assert store.scalar("SELECT count(*) FROM text_labels") == 0
