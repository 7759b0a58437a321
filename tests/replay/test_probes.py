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


# Each probe as barrier operations: ("expect", bytes) is arrive.expect_tx, ("land", bytes) one bulk
# copy's complete_tx, ("mark",) notes the parity before the probe's last expect_tx.
PROGRAMS = {
    "exact": [("expect", 4096)] + [("land", 1024)] * 4,
    "short_racing": [("expect", 3072)] + [("land", 1024)] * 4,
    "short_one_copy": [("expect", 3072), ("land", 4096)],
    "extra_copy_after_completion": [("expect", 3072)] + [("land", 1024)] * 4
    + [("mark",), ("expect", 1024)],
    "complete_tx_first": [("land", 1024), ("expect", 1024)],
    "copy_before_expect": [("land", 1024), ("expect", 1024)],
    "long": [("expect", 5120)] + [("land", 1024)] * 4,
}


def model(probe: str) -> dict:
    """(phase 0 completed, parity at the end, parity before the last expect_tx) per the model."""
    bar = Mbarrier()
    bar.init(1)
    before = None
    for op, *nbytes in PROGRAMS[probe]:
        if op == "expect":
            bar.arrive_expect_tx(*nbytes)
        elif op == "land":
            bar.complete_tx(*nbytes)
        else:
            before = bar.parity
    return {"phase0_completed": bar.phase >= 1, "parity_at_end": bar.parity,
            "parity_before_expect": before}


def test_every_probe_was_measured_without_a_trap():
    assert set(RESULTS) == set(PROBES) == set(PROGRAMS)
    assert SHIPPED["device"]["device"].startswith("NVIDIA H")
    for result in RESULTS.values():
        assert result["error"] is None and result["finished"], result


@pytest.mark.parametrize("probe", [p for p in PROBES if p != "short_racing"])
def test_the_barrier_model_predicts_the_hardware(probe):
    """`short_racing` is a race (four copies against a short count: early or never, see the
    `scale` rows), so one run of it predicts nothing."""
    measured = RESULTS[probe]
    predicted = model(probe)
    assert {k: measured[k] for k in predicted} == predicted
