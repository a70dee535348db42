"""CS4's released CSVs as they are: 50 tasks at 5 levels of specificity (the same `Instruction
Number` and task with 7, 15, 23, 31 and 39 constraints), a byte-order mark, `Instruction ` with a
trailing space, quoted multi-line constraint cells. Each file imports whole, once; the five lists
of a task are one instruction family; the report reads satisfaction against the number of
constraints per family (CS4's own analysis)."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from pipeline.importing.common import ImportOptions, ImportSummary, Problems
from pipeline.importing.importer import import_file
from pipeline.importing.reading import read_released_list
from pipeline.importing.writer import ImportWriter
from pipeline.store import imports
from pipeline.store.families import family_member, family_members
from tests.support.app import on_screen
from tests.support.import_files import CS4_HEADER, refused, row_lines, write_csv

CS4_LEVELS = (7, 15, 23, 31, 39)


def released_rows(tasks: int, levels: tuple[int, ...] = CS4_LEVELS) -> list[list[str]]:
    """The released layout: every task at every level, in that order, the same number and task text."""
    rows = []
    for number in range(1, tasks + 1):
        for level in levels:
            items = [f"The story should show detail {j} of task {number} with care."
                     for j in range(1, level + 1)]
            rows.append([str(number),
                         f"Write a story about the lighthouse keeper number {number}.", str(level),
                         "\r\n".join(f"{j}. {t}" for j, t in enumerate(items, 1))])
    return rows


def test_both_released_files_import_whole_as_families_and_again_add_nothing(store, tmp_path):
    for name in ("Instruction-based Constraints.csv", "Story-based Constraints.csv"):
        path = write_csv(tmp_path / name, CS4_HEADER, released_rows(50))
        assert path.read_bytes().startswith(b"\xef\xbb\xbfInstruction Number,Instruction "
                                            b",Number of Constraints,")
        started = time.perf_counter()
        summary = import_file(store, ImportOptions("cs4", path))
        seconds = time.perf_counter() - started
        assert summary.rows == 250 and not summary.warnings
        assert dict(summary.added) == {"instructions": 250, "constraints": 50
                                       * sum(CS4_LEVELS), "families": 50}
        again = import_file(store, ImportOptions("cs4", path))
        assert not again.added and again.skipped == {"instruction already imported": 250}
        print(f"{name}: 250 rows in {seconds:.2f} s")
    members = family_members(store)
    assert len(members) == 500
    run = "import-Story-based Constraints"
    first = imports.imported_instruction(store, run, "1/7")
    assert first is not None and first.main_task == "Write a story about the lighthouse keeper number 1."
    member = family_member(store, first.id)
    assert member is not None and (member.run_id, member.family, member.level) == (run, "1", 7)
    # Each family of each file: its five levels, each list as long as its level.
    by_family: dict[tuple[str, str], list[int]] = {}
    for m in members.values():
        by_family.setdefault((m.run_id, m.family), []).append(m.level)
    assert len(by_family) == 100 and all(sorted(levels) == list(CS4_LEVELS) for levels in by_family.values())
    n_constraints = {r["source_id"]: r["n_constraints"] for r in store.query(
        "SELECT source_id, n_constraints FROM instructions WHERE run_id = ?", [run])}
    assert n_constraints["50/39"] == 39 and n_constraints["7/15"] == 15


def test_a_repeated_number_and_level_names_both_lines_and_writes_nothing(store, tmp_path):
    rows = released_rows(2)
    rows.append(list(rows[1]))  # task 1 at 15 constraints, again
    path = write_csv(tmp_path / "cs4.csv", CS4_HEADER, rows)
    msg = refused(store, ImportOptions("cs4", path))
    starts = row_lines(rows)
    assert (f"{path}:{starts[-1]}, column 1 ('Instruction Number'): instruction number 1 with 15 "
            "constraints repeats "
            f"line {starts[1]}") in msg
    assert "1 problem(s)" in msg
    assert store.scalar("SELECT count(*) FROM instructions") == 0
    assert store.scalar("SELECT count(*) FROM instruction_families") == 0


def test_what_is_off_but_usable_imports_with_warnings_naming_the_line(store, tmp_path):
    rows = released_rows(2)
    rows[1][1] = ""  # task 1 at 15: empty, its family's task is used
    rows[2][3] = rows[2][3].replace("3. ", "4. ", 1)  # task 1 at 23: numbering skips
    rows[3][3] = "\r\n".join(rows[3][3].split("\r\n")[:-1])  # task 1 at 31: the list holds 30
    rows[4][2] = "39.0"  # as a spreadsheet may save it
    rows[5][3] = " ".join(rows[5][3].split("\r\n"))  # task 2 at 7: the items inline on one line
    rows[6][2] = ""  # task 2 at 15: the count left empty, the list says it
    rows[7][1] = "Write about keeper 2."  # task 2 at 23: worded otherwise, kept as it is
    path = write_csv(tmp_path / "cs4.csv", CS4_HEADER, rows)
    summary = import_file(store, ImportOptions("cs4", path, name="odd"))
    assert summary.added["instructions"] == 10 and summary.added["families"] == 2
    starts = row_lines(rows)
    assert summary.warnings == [
        f"{path}:{starts[2]}: the numbering is off (item 3 is numbered 4); read in list order",
        f"{path}:{starts[3]}: 'Number of Constraints' says 31, the list holds 30; imported "
        "as listed, at level 31",
        f"{path}:{starts[6]}: 'Number of Constraints' is empty; the list's 15 constraints are its level",
        f"{path}:{starts[1]}: the task is empty; the one of instruction number 1's other levels is used",
        f"{path}: instruction number 2 words its task differently on lines "
        f"{', '.join(map(str, starts[5:]))}; "
        "each level keeps its own",
    ]
    tasks = {r["source_id"]: (r["main_task"], r["n_constraints"]) for r in store.query(
        "SELECT source_id, main_task, n_constraints FROM instructions")}
    assert tasks["1/15"][0] == "Write a story about the lighthouse keeper number 1."
    assert tasks["2/23"][0] == "Write about keeper 2."
    assert (tasks["1/31"][1] == 30 and tasks["1/39"][1] == 39 and tasks["2/7"][1] == 7
            and tasks["2/15"][1] == 15)
    odd = imports.imported_instruction(store, "import-odd", "1/31")
    assert odd is not None and (member := family_member(store, odd.id)) is not None and member.level == 31


def test_read_released_list():
    assert read_released_list("1. Open with rain\n  all day.\n2) Close.",
                              2).items == ["Open with rain all day.", "Close."]
    inline = read_released_list("1. Open with rain 2. Close at 3 a.m. 3. End.", 3)
    assert inline.items == ["Open with rain", "Close at 3 a.m.", "End."] and not inline.notes
    preamble = read_released_list("Constraints:\n1. x\n2. y", 2)
    assert preamble.items == ["x",
                              "y"] and preamble.notes == ["text before constraint 1 left out: 'Constraints:'"]
    with pytest.raises(ValueError, match="no numbered constraints"):
        read_released_list("nothing numbered here", 3)


def _judge(store, run_id: str, levels: tuple[int, ...]) -> None:
    """Two models' responses to every level of task 1 and 2, each judged Yes on its first 5
    constraints (m1) or 3 (m2); m1's responses summarised at 0.25 and judged Yes on the first 2."""
    summary = ImportSummary(run_id, Path("judged"), None, None)
    writer = ImportWriter(store, summary, Problems(Path("judged")))
    imports.begin_immediate(store)
    for number in (1, 2):
        for level in levels:
            stored = imports.imported_instruction(store, run_id, f"{number}/{level}")
            assert stored is not None
            for model, yes in (("m1", 5), ("m2", 3)):
                text = f"A response by {model} to task {number} at {level} constraints. " * 5
                rid = writer.generation("response", stored.id, text, model=model, mode="direct")
                writer.verdicts(rid, stored.id, "judge", "\n".join(
                    f"{i}. {'Yes' if i <= yes else 'No'}" for i in range(1, level + 1)))
                if model == "m1":
                    sid = writer.generation("summary", stored.id, f"A summary of {text[:40]}",
                                            model="s", ratio=0.25,
                                            parent_id=rid)
                    writer.verdicts(sid, stored.id, "judge", "\n".join(
                        f"{i}. {'Yes' if i <= 2 else 'No'}" for i in range(1, level + 1)))
    store.commit()


def test_report_shows_satisfaction_by_number_of_constraints_per_family(store, tmp_path):
    from rich.console import Console

    from pipeline.outputs.report import ReportOptions, build_report, render, write_tables

    path = write_csv(tmp_path / "Story-based Constraints.csv", CS4_HEADER, released_rows(2))
    import_file(store, ImportOptions("cs4", path, name="cs4"))
    _judge(store, "import-cs4", CS4_LEVELS)
    report = build_report(store, ReportOptions(copy=False, n_resamples=50))
    cells = {(f.level, f.model): f for f in report.families}
    assert sorted({f.level for f in report.families}) == list(CS4_LEVELS)
    for level in CS4_LEVELS:
        m1, m2 = cells[level, "m1"], cells[level, "m2"]
        assert (m1.n, m2.n) == (2, 2) and m1.run_id == "import-cs4"
        assert m1.org.value == pytest.approx(5 / level) and m2.org.value == pytest.approx(3 / level)
        assert m1.core.value == pytest.approx(2 / level) and m1.ratio == 0.25
        assert m2.ratio is None and m2.core.n == 0  # m2 has no summary: no Core
    console = Console(record=True, width=200)
    render(report, console)
    text = console.export_text()
    assert "import-cs4: satisfaction by number of constraints" in text
    assert "m1/direct Org" in text and "m1/direct Core@0.25" in text and "m2/direct Core" not in text
    line_39 = next(line for line in text.splitlines() if line.strip("│ ").startswith("39 "))
    assert f"{100 * 5 / 39:.1f}" in line_39 and f"{100 * 2 / 39:.1f}" in line_39
    written = write_tables(report, tmp_path / "out")
    assert tmp_path / "out" / "families.csv" in written
    csv_text = (tmp_path / "out" / "families.csv").read_text()
    assert csv_text.splitlines()[0].startswith("run_id,level,model,mode,n,ratio,org,org_low,org_high,core")
    families = json.loads((tmp_path / "out" / "report.json").read_text())["families"]
    assert len(families) == 10 and {(f["level"], f["model"]) for f in families} == set(cells)


def test_report_without_families_writes_no_family_table(store, tmp_path):
    from pipeline.outputs.report import ReportOptions, build_report, write_tables

    path = write_csv(tmp_path / "cs4.csv", CS4_HEADER, released_rows(2))
    import_file(store, ImportOptions("cs4", path, name="cs4"))
    report = build_report(store, ReportOptions(copy=False, n_resamples=10))
    assert report.families == []  # families, but nothing judged
    written = write_tables(report, tmp_path / "out")
    assert tmp_path / "out" / "families.csv" not in written
    assert json.loads((tmp_path / "out" / "report.json").read_text())["families"] == []


def test_a_store_from_before_families_gains_their_table(store_path, tmp_path):
    import sqlite3

    from pipeline.store.database import SCHEMA_VERSION, open_store
    from pipeline.store.schema import MIGRATIONS, _v8

    open_store(store_path).close()
    conn = sqlite3.connect(store_path)
    conn.execute("DROP TABLE instruction_families")
    conn.execute(f"PRAGMA user_version = {MIGRATIONS.index(_v8)}")  # the version before families
    conn.commit()
    conn.close()
    store = open_store(store_path)
    assert store.schema_version == SCHEMA_VERSION
    summary = import_file(store,
                          ImportOptions("cs4", write_csv(tmp_path / "cs4.csv", CS4_HEADER, released_rows(1))))
    assert summary.added["families"] == 1 and len(family_members(store)) == 5
    store.close()


async def test_the_report_screen_shows_the_family_table(store_path, tmp_path):
    """The app's Report screen shows the same family rows `report` prints (level x model, Org and
    Core), and hides the table on a store without families."""
    from pipeline.store.database import open_store
    from unspecific_tui.app import UnspecificApp

    store = open_store(store_path)
    path = write_csv(tmp_path / "Story-based Constraints.csv", CS4_HEADER, released_rows(2))
    import_file(store, ImportOptions("cs4", path, name="cs4"))
    _judge(store, "import-cs4", CS4_LEVELS)
    store.close()
    app = UnspecificApp(store_path, stages={})
    async with on_screen(app, "6", (160, 48)):
        table = app.screen.query_one("#family-table")
        assert table.display
        rows = {(str(r[0]), str(r[1])): r for r in (table.get_row_at(i) for i in range(table.row_count))}
        assert set(rows) == {(str(level), model) for level in CS4_LEVELS for model in ("m1", "m2")}
        assert rows["39", "m1"][4].startswith(f"{100 * 5 / 39:.1f}")  # Org, as `report` prints it
        assert rows["39", "m1"][5].startswith(f"{100 * 2 / 39:.1f}") and rows["39", "m2"][5] == "-"
