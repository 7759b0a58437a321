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


# ------------------------------------------- version 3: .noComplete and CTA lifetime

NEW_ROWS = [(part, row) for part in ("no_complete", "remote_after_exit")
            for row in SHIPPED[part]["rows"]]


def test_version_3_holds_every_new_probe():
    from app.capture.probes import EXIT, EXIT_CLUSTERS, NO_COMPLETE

    assert SHIPPED["version"] == 3
    assert [r["probe"] for r in SHIPPED["no_complete"]["rows"]] == list(NO_COMPLETE)
    assert [r["probe"] for r in SHIPPED["remote_after_exit"]["rows"]] == list(EXIT)
    assert SHIPPED["remote_after_exit"]["clusters_per_launch"] == EXIT_CLUSTERS
    for row in SHIPPED["remote_after_exit"]["rows"]:
        assert row["clusters"] == row["launches"] * EXIT_CLUSTERS == len(row["runs"]) * 66
        assert sum(row["endings"].values()) == row["launches"]


@pytest.mark.parametrize("part, row", NEW_ROWS, ids=[r["probe"] for _, r in NEW_ROWS])
def test_every_new_ending_is_reachable_or_its_difference_is_written_down(part, row):
    """What silicon showed is an ending the model reaches, or one probes.DIFFERENCES explains
    in a sentence the row carries; a sentence for an ending silicon did not show is stale."""
    from app.capture.probes import DIFFERENCES

    model = row["model"]
    reachable, differs = set(model["reachable"]), model.get("differs", {})
    assert row["silicon"], row["probe"]
    assert set(row["silicon"]) <= reachable | set(differs), (row["probe"], row["silicon"])
    assert set(differs) == set(row["silicon"]) - reachable
    assert all(DIFFERENCES[k] == text for k, text in differs.items())
    assert model["complete"]


@pytest.mark.parametrize("part, row", NEW_ROWS, ids=[r["probe"] for _, r in NEW_ROWS])
def test_the_new_model_columns_are_what_the_checker_finds_now(part, row):
    from app.capture.probes import exit_pipeline, no_complete_pipeline, program_model

    text = (no_complete_pipeline if part == "no_complete" else exit_pipeline)(row["probe"])
    now = program_model(text)
    for key in ("pipeline", "verdict", "found", "endings", "reachable"):
        assert now[key] == row["model"][key], (row["probe"], key)


def test_pending_count_reads_the_count_prior_to_each_arrive_on_silicon_and_in_the_model():
    from app.capture.probes import pending_count_model

    row = next(r for r in SHIPPED["no_complete"]["rows"] if r["probe"] == "pending_count")
    assert row["error"] is None and row["phase0_completed"] is False
    assert row["pending_count"] == [3, 2] == row["model"]["pending_count"]
    assert pending_count_model() == [3, 2]


def test_the_probes_pending_count_model_is_what_the_mbarrier_route_answers():
    """probe_models reads the barrier model directly (a GPU machine has no web layer); the
    route `POST /api/v1/mbarrier/run` must answer the same."""
    from app.api.routes.mbarrier import RunRequest, run_ops
    from app.capture.probes import pending_count_model

    ops = [{"op": "init", "count": 3},
           {"op": "arrive", "token": "s1", "no_complete": True},
           {"op": "arrive", "token": "s2", "no_complete": True},
           {"op": "pending_count", "token": "s1"}, {"op": "pending_count", "token": "s2"}]
    states = run_ops(RunRequest.model_validate({"ops": ops}).ops)
    assert [s["pending_count"] for s in states if s["op"] == "pending_count"] == \
        pending_count_model()


def test_what_the_h200_does_with_a_completing_no_complete():
    """Undefined in PTX (the model stops: rule no_complete); the H200 ran it as a plain arrive:
    no trap, the phase completed, and the barrier went on working."""
    rows = {r["probe"]: r for r in SHIPPED["no_complete"]["rows"]}
    for probe in ("no_complete", "no_complete_last"):
        row = rows[probe]
        assert row["model"]["reachable"] == ["no_complete"]
        assert row["error"] is None and row["finished"]
        assert row["phase0_completed"] and row["token_phase_completed"]
        assert row["later_arrive_returned"]
    assert rows["no_complete"]["parity_at_end"] == 0       # the later arrive completed phase 1
    assert rows["no_complete_last"]["parity_at_end"] == 1  # init 2: one arrival still pending


def test_what_the_h200_does_with_a_remote_arrive_into_an_exited_cta():
    """The arrive instruction returns, but nothing ordered after it does: the fence after it
    never completes and the launch hangs; with no fence after it, the kernel finishes."""
    rows = {r["probe"]: r for r in SHIPPED["remote_after_exit"]["rows"]}
    control = rows["peer_alive"]
    assert control["endings"]["finished"] == control["launches"]
    assert control["peer_saw_arrive"] == control["clusters"]
    for probe in ("arrive_0us", "arrive_1us", "arrive_10us", "arrive_100us", "multicast_100us"):
        row = rows[probe]
        assert row["endings"]["hung"] == row["launches"] and row["endings"]["trapped"] == 0
        assert row["silicon"] == ["remote_after_exit"], probe  # the model stops there
        assert row["remote_returned"] == row["clusters"] and row["returned"] == 0, probe
    quiet = rows["arrive_then_exit_100us"]
    assert quiet["endings"]["finished"] == quiet["launches"]
    assert quiet["silicon"] == ["remote_after_exit"]


def test_the_capture_package_imports_no_web_layer():
    """A GPU machine has CuPy and nvcc but no FastAPI: nothing under app/capture (and the
    replay it ships) may import the web layer, at module or function level."""
    import ast

    root = Path(__file__).resolve().parents[2] / "app"
    files = sorted((root / "capture").glob("*.py")) + [
        p for p in sorted((root / "replay").glob("*.py")) if p.name != "routes.py"]
    offenders = []
    for path in files:
        for node in ast.walk(ast.parse(path.read_text())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else []
            offenders += [f"{path.name}: {n}" for n in names
                          if n.split(".")[0] in ("fastapi", "pydantic", "starlette")
                          or n.startswith(("app.api", "app.web"))]
    assert offenders == []
