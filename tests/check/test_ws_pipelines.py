"""CUTLASS's warp-specialized PipelineTmaAsync unit test, transcribed into bench/pipelines/
(ws_1x1, ws_2x1, ws_2x2, ws_4x1): each correct configuration is safe under every schedule, and
its two toggles bite where they can (the tail that keeps a CTA alive for its peers' last
releases; the tail's start state)."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.check.engine import Explorer
from app.scenarios import from_source

from .helpers import STATE_BOUND, lengths

PIPELINES = Path(__file__).resolve().parents[2] / "bench" / "pipelines"


def explore(name: str, bugs=(), **params):
    scenario = from_source((PIPELINES / f"{name}.pipe").read_text())
    return Explorer(scenario.resolve(params, list(bugs))).explore(STATE_BOUND)


CORRECT = [
    *[("ws_1x1", s, i) for s in (2, 3, 5) for i in (1, 2, 3, 4, 6, 8)],
    ("ws_1x1", 10, 8),
    *[("ws_2x1", s, i) for s in (2, 3) for i in (1, 2, 3, 4)],
    ("ws_2x1", 2, 8),
    ("ws_2x2", 2, 1),
    ("ws_4x1", 2, 1),
]


@pytest.mark.parametrize(("name", "stages", "iterations"), CORRECT)
def test_correct_configurations_are_safe(name, stages, iterations):
    out = explore(name, stages=stages, iterations=iterations)
    assert out.verdict == "safe", lengths(out)
    assert out.complete and out.stopped_by is None


@pytest.mark.parametrize(("name", "iterations", "kinds"), [
    ("ws_1x1", 3, set()),                       # one CTA: nobody arrives on it from outside
    ("ws_2x1", 1, {"remote_after_exit"}),
    ("ws_2x1", 3, {"remote_after_exit"}),
])
def test_no_producer_tail(name, iterations, kinds):
    out = explore(name, ["no_producer_tail"], stages=2, iterations=iterations)
    assert out.complete
    assert set(out.found) == kinds


@pytest.mark.parametrize("name", ["ws_1x1", "ws_2x1"])
def test_tail_from_start(name):
    # Fewer iterations than stages: the tail starts from PipelineState{} anyway.
    assert explore(name, ["tail_from_start"], stages=2, iterations=1).verdict == "safe"
    # The prologue filled every stage: a tail from phase 0 waits on a phase long completed.
    out = explore(name, ["tail_from_start"], stages=2, iterations=3)
    assert out.complete and {"stale_wait", "deadlock"} <= set(out.found)
