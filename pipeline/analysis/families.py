"""CS4's instruction families: satisfaction against the number of constraints (7, 15, 23, 31 or 39),
per import run, level, model and mode, from the metrics' per-response rows. The numbers `report`,
the HTML report and the app's Report screen show; drawing them is pipeline.outputs'."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from pipeline.analysis.metrics import Metrics
from pipeline.analysis.stats import DEFAULT_RESAMPLES, NAN_INTERVAL, Interval, bootstrap_mean
from pipeline.core.definitions import same_ratio
from pipeline.store.families import family_members
from pipeline.store.view import StoreReader, store_of


@dataclass(frozen=True)
class FamilyLevel:
    """One level of specificity of an import's instruction families (CS4: 7, 15, 23, 31 or 39
    constraints) for one model and mode: Org over the level's responses and Core at the report ratio
    over the summarised ones, each the mean of the per-response figures of the metrics (the same rows
    as the main table), with a bootstrap 95% interval over instructions (one per family at a level)."""

    run_id: str
    level: int
    model: str
    mode: str
    n: int  # instructions with a judged response
    org: Interval
    core: Interval  # at ``ratio``; NaN where nothing is summarised
    ratio: float | None

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"run_id": self.run_id, "level": self.level, "model": self.model,
                               "mode": self.mode,
                               "n": self.n, "ratio": self.ratio}
        for name in ("org", "core"):
            iv: Interval = getattr(self, name)
            out[name], out[f"{name}_low"], out[f"{name}_high"] = iv.value, iv.low, iv.high
        return out


def family_levels(reader: StoreReader, metrics: Metrics, ratio: float | None, *,
                  n_resamples: int = DEFAULT_RESAMPLES,
                  seed: int = 0) -> list[FamilyLevel]:
    """Org (and Core at ``ratio``) per (import run, level, model, mode) over the instructions that
    belong to a family; empty when the selection holds none."""
    store = store_of(reader)
    members = family_members(store)
    if not members:
        return []
    org: dict[tuple[str, int, str, str], dict[int, list[float]]] = {}
    core: dict[tuple[str, int, str, str], dict[int, list[float]]] = {}
    for row in metrics.rows:
        member = members.get(row.instruction_id)
        if member is None:
            continue
        key = (member.run_id, member.level, row.model, row.mode)
        if row.ratio is None:
            org.setdefault(key, {}).setdefault(row.instruction_id, []).append(row.org)
        elif ratio is not None and same_ratio(row.ratio, ratio):
            core.setdefault(key, {}).setdefault(row.instruction_id, []).append(row.core)

    def per_instruction(values: dict[int, list[float]]) -> list[float]:
        # An instruction counts once (two responses of one model and mode, from two imports, are averaged).
        kept = [[v for v in vs if not math.isnan(v)] for vs in values.values()]
        return [sum(vs) / len(vs) for vs in kept if vs]

    out = []
    for key in sorted(org, key=lambda k: (k[0], k[2], k[3], k[1])):
        orgs = per_instruction(org[key])
        cores = per_instruction(core.get(key, {}))
        out.append(FamilyLevel(*key, n=len(orgs),
                               org=bootstrap_mean(orgs, n_resamples=n_resamples, seed=seed),
                               core=bootstrap_mean(cores, n_resamples=n_resamples, seed=seed) if cores
                               else NAN_INTERVAL, ratio=ratio if cores else None))
    return out
