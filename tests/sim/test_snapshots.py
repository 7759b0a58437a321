"""Consecutive snapshots (app.sim.snapshot.Snapshots) reuse the parts that did not change: each
one must still equal the snapshot built from scratch, over every scenario and every program of
the engine's tests, and a window's patches (`Snapshots.patch_next`) must rebuild every snapshot
from its base and be, byte for byte, `patch` of the fresh snapshots."""

import copy
import json

import pytest

from app.scenarios import catalogue, from_source, get
from app.sim.schedule import Schedule
from app.sim.snapshot import Snapshots, patch
from app.sim.trace import Run
from tests.sim.semantics_helpers import CAPTURED_PROGRAMS, PROGRAMS

STEPS = 400
SCHEDULES = (Schedule("round_robin"), Schedule("random", seed=11))
PIPES = sorted(p.stem for p in (*PROGRAMS.glob("*.pipe"), *CAPTURED_PROGRAMS.glob("*.pipe")))


def scenario_run(scenario_id: str, schedule: Schedule) -> Run:
    scenario = get(scenario_id)
    cfg = scenario.resolve({}, [])
    return Run.complete(cfg, schedule, scenario.describe(cfg), step_limit=STEPS)


def program_run(name: str, schedule: Schedule) -> Run:
    path = PROGRAMS / f"{name}.pipe"
    text = (path if path.exists() else CAPTURED_PROGRAMS / f"{name}.pipe").read_text()
    return Run.complete(from_source(text).resolve({}, []), schedule, step_limit=STEPS)


def apply(snapshot: dict, change: dict) -> dict:
    """static/js/player.js's patch, in Python."""
    out = copy.deepcopy(snapshot)
    out.update(copy.deepcopy(change["set"]))
    for name, items in change["items"].items():
        for index, item in items.items():
            out[name][int(index)] = copy.deepcopy(item)
    return out


def assert_consecutive(run: Run) -> None:
    machine = run.machine_at(0)
    fresh = run.machine_at(0)
    snapshots = Snapshots(machine)
    taken = [snapshots.take()]
    expected = [fresh.snapshot()]
    for move in run.choices:
        machine.step(move)
        fresh.step(move)
        taken.append(snapshots.take())
        expected.append(fresh.snapshot())
    assert taken == expected  # all of them at the end: a later step must not change an earlier one
    assert [r["snapshot"] for r in run.steps(1, run.total_steps)] == expected[1:]
    for first in (1, max(1, run.total_steps // 2)):
        base, records = run.patched_steps(first, run.total_steps)
        assert base == expected[first - 1]
        state = base
        for record in records:
            state = apply(state, record["patch"])
            assert state == expected[record["step"]]
            step = record["step"]  # the same bytes as patching fresh snapshots, in their order
            assert json.dumps(record["patch"]) == json.dumps(patch(expected[step - 1],
                                                                   expected[step]))


@pytest.mark.parametrize("schedule", SCHEDULES, ids=lambda s: s.kind)
@pytest.mark.parametrize("scenario_id", list(catalogue()))
def test_scenario_snapshots_are_fresh(scenario_id, schedule):
    assert_consecutive(scenario_run(scenario_id, schedule))


@pytest.mark.parametrize("schedule", SCHEDULES, ids=lambda s: s.kind)
@pytest.mark.parametrize("name", PIPES)
def test_program_snapshots_are_fresh(name, schedule):
    assert_consecutive(program_run(name, schedule))


def test_unchanged_parts_are_shared_and_patches_skip_them():
    """Why it is cheap: a part that did not change is the object of the step before."""
    run = scenario_run("double_buffer_tma", Schedule("round_robin"))
    machine = run.machine_at(0)
    snapshots = Snapshots(machine)
    before = snapshots.take()
    shared = 0
    for move in run.choices[:50]:
        machine.step(move)
        now = snapshots.take()
        shared += sum(now[k] is before[k] for k in ("barriers", "stages", "tma"))
        shared += sum(a is b for a, b in zip(now["agents"], before["agents"], strict=True))
        assert set(patch(before, now)["set"]) <= {k for k in now if now[k] != before[k]}
        before = now
    assert shared > 50


def test_past_the_end_window_is_based_on_the_last_state():
    run = scenario_run("single_barrier", Schedule("round_robin"))
    base, records = run.patched_steps(run.total_steps + 5, run.total_steps + 9)
    assert records == [] and base == run.snapshot(run.total_steps)


def test_a_barrier_shows_as_its_as_dict():
    run = scenario_run("double_buffer_tma", Schedule("round_robin"))
    machine = run.machine_at(run.total_steps // 2)
    shown = machine.snapshot()["barriers"]
    assert shown == [{"name": name, **b.as_dict(), "tx_held": held} for name, b, held
                     in zip(machine.barrier_names, machine.barriers, machine.held, strict=True)]
    assert [list(item) for item in shown] == [["name", *b.as_dict(), "tx_held"]
                                              for b in machine.barriers]
