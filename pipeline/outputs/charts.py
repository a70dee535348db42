"""What every PNG chart of the report ends with (pipeline.outputs.report, pipeline.outputs.copy_report)."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def save_chart(fig: Any, path: Path) -> Path:
    """``fig`` laid out, written to ``path`` at the report's resolution and closed; ``path``."""
    import matplotlib.pyplot as plt

    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)  # pyplot keeps every open figure: a report of many domains would hold them all
    return path
