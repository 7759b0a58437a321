"""On a GPU: run the tx-count probes again and check each ends as the shipped probes.json says.

Marked `gpu`; skipped where CuPy or a CUDA device is missing. `short_racing` races four copies, so
only its absence of a trap is required; every other probe is one thread on one barrier.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from app.capture import probes

from .test_gpu_capture import _cuda_device

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not _cuda_device(), reason="needs CuPy and a CUDA device"),
]

SHIPPED = json.loads((Path(__file__).resolve().parents[2] / "traces" / "probes.json").read_text())


def test_probes_end_as_shipped(tmp_path, capsys):
    out = tmp_path / "probes.json"
    assert probes.main(["--out", str(out), "--launches", "2"]) == 0
    measured = {r["probe"]: r for r in json.loads(out.read_text())["probes"]}
    for shipped in SHIPPED["probes"]:
        now = measured[shipped["probe"]]
        assert now["error"] is None, now
        if shipped["probe"] == "short_racing":
            continue
        for field in ("phase0_completed", "parity_at_end", "parity_before_expect"):
            assert now[field] == shipped[field], (shipped["probe"], field, now)
    # at scale: the deterministic rows end the same way, and every ending is one the checker
    # finds reachable (the racing rows' rates move from run to run)
    doc = json.loads(out.read_text())
    rows = {r["probe"]: r for r in doc["scale"]["rows"] + doc["granularity"]["rows"]}
    for shipped in SHIPPED["scale"]["rows"]:
        now = rows[shipped["probe"]]
        seen = {k for k in ("completed", "early", "hung") if now[k]}
        assert seen <= set(now["model"]["reachable"]), (shipped["probe"], seen)
        if shipped["probe"] in ("exact", "exact_one_copy", "long"):
            assert now["rates"] == shipped["rates"]
    # .noComplete and CTA lifetime (version 3): what silicon shows is reachable in the model
    # (or, where the model cannot reach it, its sentence in probes.DIFFERENCES says why)
    for part in ("no_complete", "remote_after_exit"):
        for row in doc[part]["rows"]:
            assert row["silicon"], (part, row["probe"], row)
            explained = set(row["model"]["reachable"]) | set(row["model"].get("differs", {}))
            assert set(row["silicon"]) <= explained, (part, row["probe"], row["silicon"])
    rows = {r["probe"]: r for r in doc["no_complete"]["rows"]}
    assert rows["pending_count"]["pending_count"] == [3, 2] == \
        rows["pending_count"]["model"]["pending_count"]
    shipped = {r["probe"]: r for r in SHIPPED.get("no_complete", {}).get("rows", [])}
    for probe, row in shipped.items():  # one thread: the same answers every time
        for field in ("error", "phase0_completed", "later_arrive_returned",
                      "parity_after_later_arrive", "parity_at_end", "pending_count"):
            assert rows[probe].get(field) == row.get(field), (probe, field, rows[probe])
