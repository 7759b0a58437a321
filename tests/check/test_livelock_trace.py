"""Livelock in traces: under round robin a run whose state and chooser repeat stops with status
`livelock` and `cycle_from`; a random run does where its cycle is forced; a manual run whose
moves end on a fair cycle is one too (so the checker's lasso comes back from the traces API), an
unfair one is not; a counter that grows forever keeps the step limit and says so."""

from __future__ import annotations

import json

import jsonschema
import pytest
from fastapi.testclient import TestClient

from app.main import app
from app.sim import SCHEMA_PATH
from app.sim.schedule import Schedule
from app.sim.trace import MAY_NOT_TERMINATE, Run

from . import programs as p
from .test_livelock import check, livelock_of


def schema_check(document: dict) -> None:
    schema = json.loads(SCHEMA_PATH.read_text())
    jsonschema.Draft202012Validator(schema).validate(document)


def assert_closes(run: Run) -> None:
    assert run.status == "livelock"
    assert run.machine_at(run.cycle_from - 1).freeze() == run.machine.freeze()
    assert run.diagnostics[-1]["kind"] == "livelock"
    assert run.diagnostics[-1]["step"] == run.total_steps


def test_round_robin_ends_the_issue_spin_as_a_livelock_within_10000_steps():
    run = Run.complete(p.config(p.SPIN), Schedule("round_robin"), step_limit=10_000)
    assert run.total_steps <= 10_000
    assert_closes(run)
    document = run.document()
    assert document["status"] == "livelock" and document["cycle_from"] == run.cycle_from
    assert document["steps"][-1]["diagnostics"][-1]["kind"] == "livelock"
    assert "spinner polls bar parity 0" in document["diagnostics"][-1]["message"]
    schema_check(document)


@pytest.mark.parametrize("source,params", [(p.SPINNERS, {"consumers": 3}),
                                           (p.RING_POLL, {"consumers": 2}),
                                           (p.INTERMITTENT, {}), (p.LOCAL_LOOP, {})],
                         ids=["spinners", "ring_poll", "intermittent", "local_loop"])
def test_round_robin_finds_other_cycles(source, params):
    bugs = ["expect_tx_long"] if source is p.RING_POLL else []
    run = Run.complete(p.config(source, bugs, **params), Schedule("round_robin"),
                       step_limit=10_000)
    assert_closes(run)


def test_round_robin_runs_a_spin_that_ends_to_its_end():
    run = Run.complete(p.config(p.SPIN_WITH_PRODUCER), Schedule("round_robin"))
    assert run.status == "done" and run.cycle_from is None
    assert "cycle_from" not in run.document()


def test_a_forced_random_cycle_is_a_livelock_and_a_chosen_one_runs_on():
    run = Run.complete(p.config(p.SPIN), Schedule("random", seed=3), step_limit=10_000)
    assert_closes(run)
    run = Run.complete(p.config(p.SPINNERS, consumers=2), Schedule("random", seed=3),
                       step_limit=5_000)
    assert run.status == "step_limit" and run.cycle_from is None


def test_a_counter_that_grows_forever_keeps_the_step_limit_and_says_so():
    run = Run.complete(p.config(p.ARRIVES_FOREVER), Schedule("round_robin"), step_limit=5_000)
    assert run.status == "step_limit" and run.total_steps == 5_000
    document = run.document(1, 10, snapshots=False)
    assert document["note"] == MAY_NOT_TERMINATE and "may not terminate" in document["note"]
    schema_check(run.document(1, 3))


def test_a_manual_run_ending_on_a_fair_cycle_is_a_livelock_an_unfair_one_is_not():
    run = Run.complete(p.config(p.SPIN), Schedule("manual", moves=("spinner",) * 3))
    assert_closes(run)
    assert run.cycle_from == 1
    unfair = Run.complete(p.config(p.SPIN_WITH_PRODUCER),
                          Schedule("manual", moves=("spinner",) * 3))
    assert unfair.status == "running" and unfair.cycle_from is None


def test_a_livelocked_run_takes_no_more_moves_and_stepping_back_clears_it():
    run = Run.complete(p.config(p.SPIN), Schedule("round_robin"))
    with pytest.raises(Exception, match="livelock"):
        run.append(0)
    run.truncate(run.total_steps - 1)
    assert run.status == "running" and run.cycle_from is None


def test_the_checkers_lasso_comes_back_from_the_traces_api():
    violation = livelock_of(check(p.BOTTOM))
    moves = violation["trace"]["scenario"]["schedule"]["moves"]
    with TestClient(app) as client:
        document = client.post("/api/v1/traces", json={"source": p.BOTTOM,
                                                        "schedule": "manual",
                                                        "moves": moves}).json()
    assert document["status"] == "livelock"
    assert document["cycle_from"] == violation["cycle_from"]
    assert document["steps"] == violation["trace"]["steps"]
    schema_check(document)
