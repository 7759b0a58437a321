"""What the GPU's collective lines say (app/replay/gpu_collective.py): a thread that returned
from `bar.sync` / `bar.red`, `elect.sync` or `bar.warp.sync` must have been let through by the
engine, with the values it logged. Checked on the shipped logs and on doctored ones (CPU)."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from app.capture.codegen import KIND_CODE
from app.replay.gpu_order import conformance, replay

RAW = Path(__file__).resolve().parents[2] / "traces" / "raw"


def _raw(name: str) -> dict:
    return json.loads((RAW / f"{name}.raw.json").read_text())


def _returns(name: str) -> list[dict]:
    return [o for o in replay(_raw(name)).observations if o["what"].startswith("returned from")]


@pytest.mark.parametrize("name", ["gen_named_barrier", "gen_named_barrier_fixed",
                                  "gen_vllm_26026_named_barrier_arrive"])
def test_every_named_barrier_sync_the_gpu_passed_the_engine_lets_through(name):
    seen = _returns(name)
    assert seen and all(o["agrees"] and o["what"] == "returned from bar.sync" for o in seen)


def test_every_lane_elected_as_on_the_gpu():
    seen = [o for o in _returns("gen_elected_lane") if o["what"] == "returned from elect.sync"]
    assert len(seen) == 2  # lanes 0 and 1 of the producer warp (`elect.sync _|leader`)
    assert sorted(o["gpu"]["elected"] for o in seen) == [0, 1]
    assert all(o["agrees"] for o in seen)


def test_a_lane_said_elected_where_the_engine_elected_another_diverges():
    raw = copy.deepcopy(_raw("gen_elected_lane"))
    code = KIND_CODE["elect"]
    row = next(r for r in raw["records"] if r[4] & 0xFF == code and r[6] == 0)
    row[6] = 1  # `elected` said 1 for a lane the engine did not elect
    report = conformance(raw)
    assert not report["matches"]
    assert "returned from elect.sync" in report["first_divergence"]["why"]


def test_a_sync_said_to_return_before_its_partner_arrived_diverges():
    """bar.sync 1, 64 returns once two warps arrived: a log in which the load warp's second
    bar.sync came before the compute warp's first arrival has it pass alone."""
    raw = copy.deepcopy(_raw("gen_named_barrier_fixed"))
    code = KIND_CODE["bar_sync"]
    rows = [r for r in raw["records"] if r[4] & 0xFF == code]
    load = [r for r in rows if r[1] == 0]
    compute = [r for r in rows if r[1] == 1]
    gap = compute[0][2] - load[1][2] + 10_000  # beyond the replay's reorder window
    for r in compute:
        r[2] += gap
        r[3] += gap
    for r in raw["records"]:
        if r[1] == 1 and r[4] & 0xFF == KIND_CODE["end"]:
            r[2] += gap
    report = conformance(raw)
    assert not report["matches"]
    assert "returned from `bar.sync` on the GPU" in report["first_divergence"]["why"]
