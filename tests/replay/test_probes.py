"""The tx-count probes measured on an H200 (traces/probes.json) against the barrier model.

Each probe's program is replayed through `Mbarrier`, one `complete_tx` per bulk copy (the unit the
hardware completes bytes in: a single 4096-byte copy against 3072 expected bytes never completed
the phase, so its bytes did not land in 1024-byte steps). The model must predict, for every probe,
whether phase 0 completed and the parity at the end.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from app.capture.probes import PROBES
from app.sim.barrier import Mbarrier

SHIPPED = json.loads((Path(__file__).resolve().parents[2] / "traces" / "probes.json").read_text())
RESULTS = {r["probe"]: r for r in SHIPPED["probes"]}


def model(probe: str) -> dict:
    """(phase 0 completed, parity at the end, parity before the last expect_tx) per the model."""
    bar = Mbarrier()
    bar.init(1)
    before = None
    if probe == "exact":
        bar.arrive_expect_tx(4096)
        for _ in range(4):
            bar.complete_tx(1024)
    elif probe == "short_racing":
        bar.arrive_expect_tx(3072)
        for _ in range(4):
            bar.complete_tx(1024)
    elif probe == "short_one_copy":
        bar.arrive_expect_tx(3072)
        bar.complete_tx(4096)
    elif probe == "extra_copy_after_completion":
        bar.arrive_expect_tx(3072)
        for _ in range(3):
            bar.complete_tx(1024)
        bar.complete_tx(1024)
        before = bar.parity
        bar.arrive_expect_tx(1024)
    elif probe == "complete_tx_first":
        bar.complete_tx(1024)
        bar.arrive_expect_tx(1024)
    elif probe == "copy_before_expect":
        bar.complete_tx(1024)
        bar.arrive_expect_tx(1024)
    elif probe == "long":
        bar.arrive_expect_tx(5120)
        for _ in range(4):
            bar.complete_tx(1024)
    return {"phase0_completed": bar.phase >= 1, "parity_at_end": bar.parity,
            "parity_before_expect": before}


def test_every_probe_was_measured_without_a_trap():
    assert set(RESULTS) == set(PROBES)
    assert SHIPPED["device"]["device"].startswith("NVIDIA H")
    for result in RESULTS.values():
        assert result["error"] is None and result["finished"], result


@pytest.mark.parametrize("probe", list(PROBES))
def test_the_barrier_model_predicts_the_hardware(probe):
    measured = RESULTS[probe]
    predicted = model(probe)
    assert {k: measured[k] for k in predicted} == predicted
