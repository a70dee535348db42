"""No dead ends in the app: every module path and attribute it names by string exists.

The Build screen's stage list is imported lazily, by name, and the app's screens lazily, through
their registry (unspecific_tui/screens/registry.py), so a renamed module or function would only show
when someone pressed the key. These tests import them all.
"""

from __future__ import annotations

import importlib

import pytest
from textual.screen import Screen

from pipeline.store.view import STAGE_UNITS
from unspecific_tui.app import SCREENS_ORDER
from unspecific_tui.screens.registry import MODES, SCREENS, screen_class
from unspecific_tui.stages import STAGES


@pytest.mark.parametrize("spec", STAGES, ids=[s.name for s in STAGES])
def test_every_stage_the_app_names_exists(spec) -> None:
    module = importlib.import_module(spec.module)
    assert callable(getattr(module, spec.function, None)), f"{spec.module}.{spec.function} does not exist"


def test_every_stage_has_a_unit_count() -> None:
    assert {s.name for s in STAGES} == set(STAGE_UNITS)


@pytest.mark.parametrize("name", list(SCREENS))
def test_every_screen_the_app_names_exists(name: str) -> None:
    assert issubclass(screen_class(name), Screen)


def test_the_app_opens_the_registry_s_modes() -> None:
    assert SCREENS_ORDER == MODES and set(MODES) <= set(SCREENS)
