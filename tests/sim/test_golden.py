"""Golden traces of the built-in scenarios: any change to the engine's behaviour shows up here.

Regenerate after an intended change with `UPDATE_GOLDEN=1 pytest tests/sim/test_golden.py`, and
read the diff before committing it.
"""

import json
import os
from pathlib import Path

import pytest

from app.scenarios import get
from app.sim.schedule import Schedule
from app.sim.trace import Run

GOLDEN = Path(__file__).resolve().parent.parent / "golden"

CASES = {
    "single_barrier": ("single_barrier", {}, [], True),
    "single_barrier-forget_phase_toggle": ("single_barrier", {}, ["forget_phase_toggle"], True),
    "double_buffer_tma": ("double_buffer_tma", {}, [], False),
    "double_buffer_tma-forget_phase_toggle": (
        "double_buffer_tma", {"stages": 2, "tiles": 4}, ["forget_phase_toggle"], False),
    "kloop_tma_mma": ("kloop_tma_mma", {}, [], False),
    "proxy_fence_store": ("proxy_fence_store", {}, [], False),
    "proxy_fence_store-missing_proxy_fence": (
        "proxy_fence_store", {}, ["missing_proxy_fence"], False),
    "cluster_multicast": ("cluster_multicast", {"tiles": 2}, [], False),
}


def render(scenario_id, params, bugs, snapshots) -> str:
    scenario = get(scenario_id)
    cfg = scenario.resolve(params, bugs)
    run = Run.complete(cfg, Schedule("round_robin"), scenario.describe(cfg))
    return json.dumps(run.document(snapshots=snapshots), indent=1, sort_keys=True) + "\n"


@pytest.mark.parametrize("name", list(CASES))
def test_golden_trace(name):
    path = GOLDEN / f"{name}.json"
    text = render(*CASES[name])
    if os.environ.get("UPDATE_GOLDEN"):
        path.write_text(text)
    assert path.exists(), f"missing golden {path.name}: run with UPDATE_GOLDEN=1"
    assert text == path.read_text()
