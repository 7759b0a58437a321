"""The tx-count probes shipped in traces/probes.json (measured on an H200, 132 CTAs x 1,000
phases a row) against the schedule checker: every ending silicon showed is one the checker finds
reachable in the same program, and the file's `model` columns are what the checker says today."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from app.capture.probes import model

SHIPPED = json.loads((Path(__file__).resolve().parents[2] / "traces" / "probes.json").read_text())
ROWS = SHIPPED["scale"]["rows"] + SHIPPED["granularity"]["rows"]
ENDINGS = ("completed", "early", "hung")


def test_every_row_counts_every_phase():
    assert SHIPPED["scale"]["ctas"] == 132 and SHIPPED["scale"]["phases_per_cta"] == 1000
    for row in ROWS:
        assert sum(row[k] for k in ENDINGS) == row["phases"] == 132_000, row["probe"]


@pytest.mark.parametrize("row", ROWS, ids=[r["probe"] for r in ROWS])
def test_every_ending_silicon_showed_is_reachable_in_the_model(row):
    seen = {k for k in ENDINGS if row[k]}
    assert seen <= set(row["model"]["reachable"]), (row["probe"], seen, row["model"])
    assert row["model"]["complete"]


@pytest.mark.parametrize("probe", ["exact", "short_one_copy", "short_racing", "long",
                                   "announce_32"])
def test_the_model_column_is_what_the_checker_finds_now(probe):
    row = next(r for r in ROWS if r["probe"] == probe)
    piece = SHIPPED["granularity"]["piece_bytes"] if probe.startswith("announce") else 1024
    now = model(row["announced"], len(row["copies"]), row["copies"][0], piece)
    assert now["reachable"] == row["model"]["reachable"]
    assert now["pipeline"] == row["model"]["pipeline"]


def test_what_the_h200_does_where_the_model_has_a_choice():
    rows = {r["probe"]: r for r in SHIPPED["scale"]["rows"]}
    assert rows["exact"]["rates"]["completed"] == 1.0
    assert rows["long"]["rates"]["hung"] == 1.0
    # one 4 KiB copy announced as 3 KiB: the same race both ways, measured
    assert 0 < rows["short_one_copy"]["rates"]["early"] < 1
    assert rows["short_spaced"]["rates"]["early"] == 1.0
    reuse = SHIPPED["reuse_before_wait"]
    assert reuse["phases"] == 132_000 and "trap" in reuse["outcome"]
    assert reuse["counts"]["saw_phase_0"] + reuse["counts"]["missed_it"] == 132_000
