"""No dead ends in the app: every module path and attribute it names by string exists.

The Build screen's stage list and the app's screens are imported lazily, by name, so a renamed
module or function would only show when someone pressed the key. These tests import them all.
"""

from __future__ import annotations

import importlib

import pytest

from pipeline.store.view import STAGE_UNITS
from unspecific_tui.app import SCREENS_ORDER
from unspecific_tui.stages import STAGES


@pytest.mark.parametrize("spec", STAGES, ids=[s.name for s in STAGES])
def test_every_stage_the_app_names_exists(spec) -> None:
    module = importlib.import_module(spec.module)
    assert callable(getattr(module, spec.function, None)), f"{spec.module}.{spec.function} does not exist"


def test_every_stage_has_a_unit_count() -> None:
    assert {s.name for s in STAGES} == set(STAGE_UNITS)


@pytest.mark.parametrize("name", SCREENS_ORDER)
def test_every_screen_the_app_names_exists(name: str) -> None:
    module = importlib.import_module(f"unspecific_tui.screens.{name}")
    assert isinstance(getattr(module, f"{name.capitalize()}Screen", None), type)
