"""What the screens read, built on the store's read-only view: no SQL here.

``AppView`` is pipeline.store.view.StoreView plus the per-response outcomes of
pipeline.analysis.metrics, cached: the Audit and Compare screens ask them per key press.
``Analysis`` is the store-wide pass the Instructions, Annotate and Report screens share
(pipeline.analysis.overview, which computes it; re-exported here); it runs in a worker thread on a
view of its own.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import TYPE_CHECKING, Any

from pipeline.analysis.overview import Analysis, InstructionRow, compute_analysis, merge_metrics
from pipeline.store.view import StoreView, Writer

if TYPE_CHECKING:
    from pipeline.analysis.metrics import Item


def item_outcomes(view: StoreView, instruction_id: int, writer: Writer, ratio: float) -> dict[int, Item]:
    """pipeline.analysis.metrics.Item per constraint of one response at one ratio, keyed by constraint id.
    With two summaries at the ratio (two summarizers), the first summary's item is kept."""
    from pipeline.analysis.metrics import Filters, constraint_items

    items = constraint_items(view,
                             Filters(instruction=instruction_id, models=(writer.model,), mode=writer.mode),
                             ratio=ratio)
    out: dict[int, Item] = {}
    for item in items:
        out.setdefault(item.constraint_id, item)
    return out


class AppView(StoreView):
    """The store view the UI thread reads, with each response's outcomes cached."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._outcomes: OrderedDict[tuple[int, Writer, float], dict[int, Item]] = OrderedDict()

    def forget(self) -> None:
        super().forget()
        self._outcomes.clear()

    def outcomes(self, iid: int, writer: Writer, ratio: float) -> dict[int, Item]:
        """pipeline.analysis.metrics.Item per constraint of ``writer``'s response to ``iid`` at ``ratio``:
        the flipped / pass-both call every screen and report shares, read once per response."""
        key = (iid, writer, ratio)
        hit = self._outcomes.get(key)
        if hit is None:
            hit = self._outcomes[key] = item_outcomes(self, iid, writer, ratio)
            if len(self._outcomes) > self._cache_size:
                self._outcomes.popitem(last=False)
        self._outcomes.move_to_end(key)
        return hit


__all__ = ["Analysis", "AppView", "InstructionRow", "compute_analysis", "item_outcomes", "merge_metrics"]
