"""A table runtime's life is one explicit phase (serving, unsynced, closing, closed, fenced),
moved only along the allowed steps: a fenced table never serves again, a closed one never
closes again."""

from __future__ import annotations

import pytest
from masa_table_engine.app.runtime import _NEXT, Phase


def test_every_phase_has_its_steps_and_fenced_is_the_end() -> None:
    assert set(_NEXT) == set(Phase)
    assert _NEXT[Phase.FENCED] == {Phase.FENCED}
    assert Phase.SERVING not in _NEXT[Phase.CLOSING] | _NEXT[Phase.CLOSED]
    # Every phase can be fenced off: another node may take any table.
    assert all(Phase.FENCED in steps for steps in _NEXT.values())


@pytest.mark.parametrize("phase", list(Phase))
def test_no_phase_goes_back_to_unsynced_once_the_game_is_over(phase: Phase) -> None:
    if phase in (Phase.CLOSING, Phase.CLOSED, Phase.FENCED):
        assert Phase.UNSYNCED not in _NEXT[phase]
