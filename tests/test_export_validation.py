"""Every exported figure names the validation its judges' error was measured by, or says it is
unvalidated with the one command that validates it (issue 27): summary, per_instruction."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np

from pipeline.analysis.correction import VALIDATE_COMMAND
from pipeline.outputs.report import ReportOptions, build_report, write_tables
from pipeline.store.database import open_store
from pipeline.store.judge_checks import put_check_items
from tests.support.judge_checks import known_check


def _tables(scripted_store, tmp_path: Path, validated: bool) -> Path:  # noqa: ANN001
    path = tmp_path / "store.sqlite"
    path.write_bytes(scripted_store[0].read_bytes())
    store = open_store(path)
    if validated:
        put_check_items(store, "judge-a", "builtin",
                        known_check(np.random.default_rng(2), 0.9, 0.7, 600, "judge-a").items)
    write_tables(build_report(store, ReportOptions(n_resamples=50, copy=False)), tmp_path / "out")
    store.close()
    return tmp_path / "out"


def _csv(path: Path) -> list[dict[str, str]]:
    with path.open(newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


def test_an_unvalidated_judges_rows_say_so_with_the_command(scripted, tmp_path: Path) -> None:  # noqa: F811
    out = _tables(scripted, tmp_path, validated=False)
    rows = _csv(out / "per_instruction.csv")
    assert rows and all(r["judges_validation"] == f"unvalidated: judge-a (`{VALIDATE_COMMAND}`)"
                        for r in rows)
    per_json = json.loads((out / "per_instruction.json").read_text())
    assert {r["judges_validation"] for r in per_json} == {rows[0]["judges_validation"]}
    assert json.loads((out / "report.json").read_text())["judges_validation"] == rows[0]["judges_validation"]
    summary = _csv(out / "summary.csv")
    assert all(r["uncorrected_reason"] == rows[0]["judges_validation"] and r["org_corrected"] == ""
               for r in summary)


def test_a_validated_judges_rows_name_the_check(scripted, tmp_path: Path) -> None:  # noqa: F811
    out = _tables(scripted, tmp_path, validated=True)
    rows = _csv(out / "per_instruction.csv")
    assert rows and {r["judges_validation"] for r in rows} == {"judge-a: builtin"}
    summary = _csv(out / "summary.csv")
    assert all(r["corrected_by"] == "judge-a: builtin" and r["org_corrected"] for r in summary)
