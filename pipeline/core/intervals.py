"""How a value and its 95% interval are written for people, in one place: the report as text,
markdown and HTML, the app, and every command's tables write '76.9 [71.8, 82.1]' through ``ci_parts``.
"""

from __future__ import annotations

import math
from typing import Any


def ci_parts(iv: Any, *, scale: float = 100.0, digits: int = 1, interval_digits: int | None = None,
             signed: bool = False) -> str | tuple[str, str]:
    """The one way a value and its 95% interval are written for people (the report as text, markdown
    and HTML, the app, every command's tables): the value and its interval apart, ('83.7',
    '[81.2, 87.1]'); the value alone without an interval; '-' when undefined. The bounds are
    separated by a comma, never a hyphen, which would read as a minus sign beside a negative bound
    ('[-3.1, 2.4]'). ``iv``: anything with ``value``, ``low`` and ``high``, or those three as a tuple;
    ``scale=1, digits=2`` for
    a kappa or a cosine; ``interval_digits`` when the bounds are shown coarser than the value;
    ``signed``: '+' before positive numbers (a difference)."""
    value, low, high = iv if isinstance(iv, tuple) else (iv.value, iv.low, iv.high)
    if math.isnan(value):
        return "-"
    sign = "+" if signed else ""
    shown = f"{scale * value:{sign}.{digits}f}"
    if math.isnan(low) or math.isnan(high):
        return shown
    bounds = digits if interval_digits is None else interval_digits
    return shown, f"[{scale * low:{sign}.{bounds}f}, {scale * high:{sign}.{bounds}f}]"


def ci(iv: Any, sep: str = " ", **how: Any) -> str:
    """``ci_parts`` as one string: '83.7 [81.2, 87.1]'; ``sep="\\n"`` puts the interval under the value."""
    parts = ci_parts(iv, **how)
    return sep.join(parts) if isinstance(parts, tuple) else parts
