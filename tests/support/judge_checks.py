"""Judge checks with a known sensitivity and specificity, and a store judged by a scripted judge."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from pipeline.store.database import open_store
from pipeline.store.judge_checks import CheckItem, JudgeCheck, judge_check
from tests.fakes.synthetic import SyntheticSpec, build_synthetic_store


def known_check(rng: np.random.Generator, sens: float, spec: float, n: int = 400,
                judge: str = "j") -> JudgeCheck:
    """A judge's check: ``n`` items, half true, verdicts drawn with the judge's error rates."""
    truth = rng.random(n) < 0.5
    verdict = np.where(truth, rng.random(n) < sens, rng.random(n) >= spec)
    return judge_check(judge, "builtin", [CheckItem("news", str(i), int(t), int(v))
                                          for i, (t, v) in enumerate(zip(truth, verdict))])


@pytest.fixture(scope="module")


def scripted(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, float]]:
    """One judge whose stored verdicts are taken as the truth, then replaced by a scripted judge with
    sensitivity 0.9 and specificity 0.7 on a benchmark whose true Org is about 0.5."""
    path = tmp_path_factory.mktemp("correction") / "store.sqlite"
    build_synthetic_store(path, SyntheticSpec(n_instructions=60, domains=("news",), conditions=("single",),
                                              models=("model-a",), judges=("judge-a",),
                                              model_skill={"model-a": (0.5, 0.6)}, seed=5))
    store = open_store(path)
    rng = np.random.default_rng(11)
    rows = store.conn.execute("SELECT v.id, v.verdict, g.kind FROM verdicts v JOIN generations g"
                              " ON g.id = v.generation_id WHERE v.verdict IS NOT NULL").fetchall()
    truth = np.array([t for _, t, _ in rows])
    scripted_verdicts = np.where(truth == 1, rng.random(len(rows)) < 0.9, rng.random(len(rows)) >= 0.7)
    with store.conn:
        store.conn.executemany("UPDATE verdicts SET verdict = ? WHERE id = ?",
                               [(int(v), vid) for v, (vid, _, _) in zip(scripted_verdicts, rows)])
    kinds = np.array([k for _, _, k in rows])
    truths = {"org": float(truth[kinds == "response"].mean()),
              "core": float(truth[kinds == "summary"].mean())}
    store.close()
    return path, truths
