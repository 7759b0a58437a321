"""app/check/state_codec.py against the engine: a machine put back part by part (`restore`) is the
machine `thaw` gives, move for move, on every state a bounded breadth-first search reaches in
configurations of every instruction family; keys made with a parent's shared parts are the keys
made without; and the checker's list of kinds that write no shared memory is what the families
declare (`Family.writes_smem`)."""

from __future__ import annotations

from collections import deque

import pytest

from app.check.model import WRITES_NO_SMEM, Canonical, new_pend
from app.check.state_codec import fits, restore, share
from app.scenarios import catalogue
from app.sim.families import FAMILIES
from app.sim.machine import RUNNING, Machine

from .helpers import config

CONFIGS = [
    ("double_buffer_tma", {"stages": 2, "tiles": 2, "consumers": 2}, []),
    ("double_buffer_tma", {"stages": 1, "tiles": 2, "consumers": 2}, ["wrong_arrival_count"]),
    ("cluster_multicast", {"stages": 1, "tiles": 2}, []),
    ("kloop_tma_mma", {"stages": 1, "tiles": 2}, ["forget_phase_toggle"]),
    ("proxy_fence_store", {"stages": 2, "tiles": 2}, ["missing_proxy_fence"]),
    *[(s, {}, []) for s in catalogue() if any(c.isdigit() for c in s)],  # the bug reports
]
STATES = 150
"""States each configuration's search visits (a bound by states, not by the clock)."""


def reachable(cfg, limit: int = STATES) -> list[tuple]:
    machine = Machine(cfg)
    first = machine.freeze()
    seen, queue, out = {first}, deque([first]), []
    while queue and len(out) < limit:
        frozen = queue.popleft()
        out.append(frozen)
        machine.thaw(frozen)
        for move in list(machine.ready):
            machine.thaw(frozen)
            machine.step(move)
            after = machine.freeze()
            if after not in seen and machine.status == RUNNING:
                seen.add(after)
                queue.append(after)
    return out


def _kinds(record: dict) -> list[str]:
    return [d["kind"] for d in record["diagnostics"]]


@pytest.mark.parametrize(("scenario", "params", "bugs"), CONFIGS,
                         ids=[f"{s}-{(b or ['correct'])[0]}" for s, _, b in CONFIGS])
def test_a_restored_machine_makes_every_move_as_a_thawed_one(scenario, params, bugs):
    cfg = config(scenario, bugs, **params)
    fast, plain = Machine(cfg), Machine(cfg)
    assert fits(fast)
    for frozen in reachable(cfg):
        fast.thaw(frozen)
        moves = list(fast.ready)
        now = None
        for move in moves:
            if now is not None:
                restore(fast, frozen, now)
                assert fast.freeze() == frozen
                assert fast.step_no == 0 and fast.ready == moves
            plain.thaw(frozen)
            want = plain.step(move)
            got = fast.step(move)
            assert _kinds(got) == _kinds(want)
            assert got["events"] == want["events"]
            reached = fast.freeze()
            assert reached == plain.freeze()
            assert fast.status == plain.status
            now = share(reached, frozen)
            assert now == reached
            assert all(a is b for a, b in zip(now, frozen, strict=True) if a == b)


@pytest.mark.parametrize(("scenario", "params", "bugs"), CONFIGS,
                         ids=[f"{s}-{(b or ['correct'])[0]}" for s, _, b in CONFIGS])
def test_a_machine_restored_from_an_unrelated_state_is_the_thawed_one(scenario, params, bugs):
    """The search puts the machine back from the last state of the previous expansion, which
    is no parent of the next: from each reachable state to the next one visited (and to a
    state far away), restored is thawed, move for move."""
    cfg = config(scenario, bugs, **params)
    fast, plain = Machine(cfg), Machine(cfg)
    states = reachable(cfg)
    for i, (was, frozen) in enumerate(zip(states, states[1:] + states[:1], strict=True)):
        for have in (was, states[(i * 7) % len(states)]):
            fast.thaw(have)
            fast.step_no = 3
            restore(fast, frozen, have)
            plain.thaw(frozen)
            assert fast.freeze() == frozen and fast.step_no == 0
            assert fast.ready == plain.ready
            for move in list(plain.ready)[:2]:
                restore(fast, frozen, fast.freeze())
                plain.thaw(frozen)
                assert _kinds(fast.step(move)) == _kinds(plain.step(move))
                assert fast.freeze() == plain.freeze()


@pytest.mark.parametrize(("scenario", "params", "bugs"), CONFIGS[:5],
                         ids=[f"{s}-{(b or ['correct'])[0]}" for s, _, b in CONFIGS[:5]])
def test_keys_with_a_parents_parts_are_the_keys_without(scenario, params, bugs):
    cfg = config(scenario, bugs, **params)
    machine = Machine(cfg)
    canonical = Canonical(machine)
    pend = new_pend(machine.n_agents)
    for frozen in reachable(cfg, 60):
        parent, parent_pend, numbers = canonical.decode_numbers(canonical.key(frozen, pend))
        machine.thaw(parent)
        for move in list(machine.ready):
            machine.thaw(parent)
            machine.step(move)
            now = share(machine.freeze(), parent)
            for child_pend in (parent_pend, [1] + parent_pend[1:]):
                assert (canonical.key(now, child_pend, parent, numbers)
                        == canonical.key(machine.freeze(), child_pend))


def test_the_kinds_that_write_no_shared_memory_are_the_families_declarations():
    declared = [f for f in FAMILIES if f.writes_smem is not None]
    assert {"load", "st_shared"}.isdisjoint(WRITES_NO_SMEM)
    assert {"arrive", "wait_parity", "store", "wait_group", "assign", "mma"} <= WRITES_NO_SMEM
    for family in FAMILIES:
        mine = set(family.handlers) & WRITES_NO_SMEM
        if family.writes_smem is None:
            assert not mine, family.name  # undeclared: every kind may write
        else:
            assert family.writes_smem <= set(family.handlers), family.name
            assert mine == set(family.handlers) - family.writes_smem
    assert len(declared) >= 9
