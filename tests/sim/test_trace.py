"""Trace contract: determinism, full snapshots at any step, checkpoints, the JSON Schema, limits."""

import json
import random

import jsonschema
import pytest

from app.scenarios import catalogue, get
from app.sim import SCHEMA_PATH
from app.sim.machine import Machine, MoveError
from app.sim.schedule import Schedule
from app.sim.trace import CHECKPOINT_EVERY, Run

SCHEMA = json.loads(SCHEMA_PATH.read_text())


def make_run(scenario_id="double_buffer_tma", bugs=(), schedule=Schedule("random", seed=5),
             step_limit=None, **params):
    scenario = get(scenario_id)
    cfg = scenario.resolve(params, list(bugs))
    kwargs = {} if step_limit is None else {"step_limit": step_limit}
    return Run.complete(cfg, schedule, scenario.describe(cfg), **kwargs)


def dump(document) -> bytes:
    return json.dumps(document, separators=(",", ":")).encode()


@pytest.mark.parametrize("scenario_id", list(catalogue()))
def test_same_inputs_give_byte_identical_traces(scenario_id):
    first = dump(make_run(scenario_id, tiles=5).document())
    second = dump(make_run(scenario_id, tiles=5).document())
    assert first == second
    other_seed = dump(make_run(scenario_id, schedule=Schedule("random", seed=6), tiles=5)
                      .document())
    assert other_seed != first


@pytest.mark.parametrize("scenario_id", list(catalogue()))
@pytest.mark.parametrize("bugs", [(), "first"])
def test_documents_validate_against_the_published_schema(scenario_id, bugs):
    if bugs == "first":
        bugs = catalogue()[scenario_id].bugs[:1]
    document = make_run(scenario_id, bugs, tiles=4).document()
    jsonschema.validate(document, SCHEMA)


def test_every_snapshot_equals_a_replay_from_step_zero():
    run = make_run(tiles=40, stages=3, consumers=2)
    assert run.total_steps > 2 * CHECKPOINT_EVERY
    machine = Machine(run.cfg)
    for k, move in enumerate(run.choices, start=1):
        machine.step(move)
        if k % 37 == 0 or k in (CHECKPOINT_EVERY, CHECKPOINT_EVERY + 1, run.total_steps):
            assert run.snapshot(k) == machine.snapshot(), k


def test_steps_window_matches_the_whole_trace():
    run = make_run(tiles=30)
    whole = run.steps(1, run.total_steps)
    window = run.document(250, 270)
    assert window["window"] == {"from": 250, "to": 270}
    assert window["steps"] == whole[249:270]
    assert window["total_steps"] == run.total_steps


def test_snapshot_step_n_is_the_state_after_step_n():
    run = make_run("single_barrier", schedule=Schedule("round_robin"), tiles=2)
    records = run.steps(1, run.total_steps)
    for record in records:
        assert record["snapshot"]["step"] == record["step"]
    assert run.snapshot(0)["barriers"][0]["valid"] is False
    assert records[0]["snapshot"]["barriers"][0]["valid"] is True


def test_step_limit_ends_the_run_with_status_step_limit():
    run = make_run(tiles=1000, step_limit=500)
    assert run.total_steps == 500
    assert run.status == "step_limit"
    assert run.document(499, 500)["status"] == "step_limit"


def test_long_run_random_access():
    run = make_run(tiles=20_000, stages=4, schedule=Schedule("round_robin"))
    assert run.total_steps > 300_000
    rng = random.Random(1)
    for k in (rng.randrange(run.total_steps) for _ in range(5)):
        snap = run.snapshot(k)
        assert snap["step"] == k


def test_truncate_and_append_diverge_cleanly():
    run = make_run(tiles=6)
    reference = run.snapshot(40)
    total = run.total_steps
    run.truncate(40)
    assert run.total_steps == 40
    assert run.machine.snapshot() == reference
    assert all(d["step"] <= 40 for d in run.diagnostics)
    run.extend(Schedule("round_robin").chooser(), 10_000)
    assert run.status == "done"
    assert run.total_steps != 0 and total != 0


def test_manual_schedule_refuses_a_blocked_agent():
    scenario = get("double_buffer_tma")
    cfg = scenario.resolve({}, [])
    with pytest.raises(MoveError, match="consumer0 is waiting on full_barrier\\[0\\] parity 0"):
        Run.complete(cfg, Schedule("manual", moves=("consumer0",)))
    with pytest.raises(MoveError, match="no mover named"):
        Run.complete(cfg, Schedule("manual", moves=("nobody",)))


def test_freeze_is_hashable_and_thaw_restores():
    run = make_run(tiles=5)
    machine = run.machine_at(23)
    frozen = machine.freeze()
    hash(frozen)
    other = Machine(run.cfg)
    other.thaw(frozen, 23)
    assert other.snapshot() == machine.snapshot()
    assert other.freeze() == frozen
