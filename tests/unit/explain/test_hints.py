"""``_explain._hints``: the fix hint that fits a cause kind and the sort of difference."""

from __future__ import annotations

from otel_jax._core._vocab import CAUSE_KINDS, CauseKind
from otel_jax._explain import _hints
from otel_jax._explain._model import Detail


def test_every_cause_kind_has_its_own_hint():
    hints = {kind: _hints.hint_for(kind) for kind in CAUSE_KINDS}
    assert all(hints.values())
    assert len(set(hints.values())) == len(hints)  # none falls back to another's


def test_an_unrecognised_kind_gets_the_unknown_hint():
    assert _hints.hint_for("no_such_kind") == _hints.hint_for(CauseKind.UNKNOWN)


def test_the_detail_picks_a_finer_hint_for_its_kind():
    static = CauseKind.STATIC_ARGUMENT
    coarse = _hints.hint_for(static)
    moved = _hints.hint_for(static, detail=Detail.MOVED.value)
    assert moved != coarse and "same way every call" in moved
    assert "function" in _hints.hint_for(static, detail=Detail.STATIC_FUNCTION.value)
    key = _hints.hint_for(CauseKind.DTYPE, detail=Detail.KEY_STYLE.value)
    assert key != _hints.hint_for(CauseKind.DTYPE) and "PRNG" in key


def test_a_detail_without_a_finer_hint_keeps_the_kind_s_hint():
    assert _hints.hint_for(CauseKind.SHAPE, detail=Detail.VALUE.value) == _hints.hint_for(
        CauseKind.SHAPE)
    # a detail of another kind does not leak into this one
    assert _hints.hint_for(CauseKind.SHAPE, detail=Detail.KEY_STYLE.value) == _hints.hint_for(
        CauseKind.SHAPE)


def test_a_transformation_outside_jit_has_its_own_function_identity_hint():
    assert _hints.hint_for(CauseKind.FUNCTION_IDENTITY, transformed=True) == (
        _hints.TRANSFORMED_HINT)
    assert _hints.hint_for(CauseKind.FUNCTION_IDENTITY) != _hints.TRANSFORMED_HINT
    # other kinds keep theirs under a transformation
    assert _hints.hint_for(CauseKind.SHAPE, transformed=True) == _hints.hint_for(
        CauseKind.SHAPE)
