"""The reductions are sound: the reduced search (local moves made at once, canonical keys) and the
plain breadth-first search over every state agree on verdicts, reachable kinds and shortest
lengths; and the two facts about the engine the reductions rest on hold in every reachable state
of small configurations."""

from __future__ import annotations

import pytest

from app.check.engine import Limits
from app.check.model import LOCAL_KINDS, Canonical, close
from app.sim.machine import PC, RUNNING, Machine

from .helpers import config, explore, lengths
from .test_counterexamples import SMALL

COMPARED = [
    *SMALL,
    ("double_buffer_tma", {"stages": 2, "tiles": 3, "consumers": 1, "tile_bytes": 2048}, None),
    ("double_buffer_tma", {"stages": 1, "tiles": 2, "consumers": 2, "tile_bytes": 2048}, None),
    ("double_buffer_tma", {"stages": 2, "tiles": 3, "consumers": 1, "tile_bytes": 2048},
     "forget_phase_toggle"),
    ("double_buffer_tma", {"stages": 2, "tiles": 3, "consumers": 1, "tile_bytes": 2048},
     "expect_tx_short"),
    ("double_buffer_tma", {"stages": 1, "tiles": 2, "consumers": 3, "tile_bytes": 2048}, None),
    ("double_buffer_tma", {"stages": 1, "tiles": 1, "consumers": 3, "tile_bytes": 2048}, None),
    ("double_buffer_tma", {"stages": 1, "tiles": 1, "consumers": 3, "tile_bytes": 2048},
     "consumer_skips_release"),
    ("double_buffer_tma", {"stages": 1, "tiles": 1, "consumers": 3, "tile_bytes": 2048},
     "forget_producer_phase_toggle"),
    ("double_buffer_tma", {"stages": 1, "tiles": 1, "consumers": 3, "tile_bytes": 2048},
     "wrong_arrival_count"),
    ("double_buffer_tma", {"stages": 1, "tiles": 1, "consumers": 4, "tile_bytes": 2048},
     "expect_tx_long"),
    ("proxy_fence_store", {"stages": 2, "tiles": 4}, None),
    ("kloop_tma_mma", {"stages": 2, "tiles": 3, "tile_bytes": 2048}, "forget_phase_toggle"),
]


@pytest.mark.parametrize(("scenario", "params", "bug"), COMPARED,
                         ids=[f"{s}-{b}-{i}" for i, (s, _, b) in enumerate(COMPARED)])
def test_reduced_and_unreduced_search_agree(scenario, params, bug):
    bugs = [bug] if bug else []
    _, reduced = explore(scenario, bugs, reduce=True, **params)
    _, full = explore(scenario, bugs, reduce=False, **params)
    assert reduced.verdict == full.verdict
    assert lengths(reduced) == lengths(full)
    assert reduced.states <= full.states


@pytest.mark.slow
def test_reduced_and_unreduced_search_agree_with_two_consumers():
    params = {"stages": 2, "tiles": 3, "consumers": 2, "tile_bytes": 2048}
    for bug in ("forget_phase_toggle", "wrong_arrival_count", "producer_skips_empty_wait"):
        _, reduced = explore("double_buffer_tma", [bug], reduce=True, **params)
        _, full = explore("double_buffer_tma", [bug], reduce=False, **params)
        assert (reduced.verdict, lengths(reduced)) == (full.verdict, lengths(full))


SLOW_COMPARED = [
    ({"stages": 1, "tiles": 2, "consumers": 3}, "wrong_arrival_count"),
    ({"stages": 1, "tiles": 2, "consumers": 3}, "expect_tx_short"),
    ({"stages": 2, "tiles": 2, "consumers": 3}, "producer_skips_empty_wait"),
    ({"stages": 1, "tiles": 2, "consumers": 4}, None),
    ({"stages": 1, "tiles": 1, "consumers": 4}, "wrong_arrival_count"),
    ({"stages": 1, "tiles": 1, "consumers": 4}, None),
    ({"stages": 1, "tiles": 1, "consumers": 4}, "producer_skips_empty_wait"),
    ({"stages": 1, "tiles": 1, "consumers": 4}, "consumer_skips_release"),
    ({"stages": 1, "tiles": 1, "consumers": 4}, "expect_tx_short"),
    ({"stages": 1, "tiles": 2, "consumers": 3}, "forget_phase_toggle"),
    ({"stages": 2, "tiles": 2, "consumers": 3}, None),
]


@pytest.mark.slow
@pytest.mark.parametrize(("params", "bug"), SLOW_COMPARED,
                         ids=[f"k{p['consumers']}-{b}" for p, b in SLOW_COMPARED])
def test_reduced_and_unreduced_search_agree_with_three_and_four_consumers(params, bug):
    """Symmetry over 3 and 4 identical consumers and the store-read reduction (the plain search
    takes up to a minute here)."""
    bugs = [bug] if bug else []
    limits = Limits(max_states=2_000_000, timeout_s=600)
    _, reduced = explore("double_buffer_tma", bugs, reduce=True, limits=limits,
                         tile_bytes=2048, **params)
    _, full = explore("double_buffer_tma", bugs, reduce=False, limits=limits,
                      tile_bytes=2048, **params)
    assert reduced.complete and full.complete
    assert (reduced.verdict, lengths(reduced)) == (full.verdict, lengths(full))
    assert reduced.states * 50 < full.states


def reachable_states(cfg) -> list[tuple]:
    """Every state of `cfg` (no reductions), breadth first."""
    machine = Machine(cfg)
    first = machine.freeze()
    seen, queue = {first}, [first]
    for frozen in queue:
        machine.thaw(frozen)
        for move in list(machine.ready):
            machine.thaw(frozen)
            machine.step(move)
            after = machine.freeze()
            if after not in seen:
                seen.add(after)
                if machine.status == RUNNING:
                    queue.append(after)
    return queue


def without_tma_order(frozen: tuple) -> tuple:
    return (*frozen[:5], tuple(sorted(frozen[5])), *frozen[6:])


MODEL_CONFIGS = [
    ("double_buffer_tma", {"stages": 1, "tiles": 2, "consumers": 2, "tile_bytes": 2048},
     ["wrong_arrival_count"]),
    ("double_buffer_tma", {"stages": 2, "tiles": 3, "consumers": 1, "tile_bytes": 2048},
     ["forget_phase_toggle"]),
    ("kloop_tma_mma", {"stages": 1, "tiles": 2, "tile_bytes": 2048}, ["forget_phase_toggle"]),
    ("proxy_fence_store", {"stages": 2, "tiles": 3, "tile_bytes": 2048}, ["missing_proxy_fence"]),
    ("single_barrier", {"tiles": 2, "tile_bytes": 2048}, ["expect_tx_short"]),
]


def after(cfg, frozen: tuple, *moves: int) -> tuple[Machine, list[set[str]]]:
    """A machine after `moves` from `frozen` (stopping at one that is not enabled), and the
    diagnostic kinds of each move made."""
    machine = Machine(cfg)
    machine.thaw(frozen)
    kinds = []
    for move in moves:
        if move not in machine.ready:
            return machine, kinds
        kinds.append({d["kind"] for d in machine.step(move)["diagnostics"]})
    return machine, kinds


@pytest.mark.parametrize(("scenario", "params", "bugs"), MODEL_CONFIGS,
                         ids=[s for s, _, _ in MODEL_CONFIGS])
def test_local_moves_commute_with_every_other_move(scenario, params, bugs):
    """model.LOCAL_KINDS: such a move raises nothing but deadlock, nothing disables it, it
    disables nothing, and it commutes with every other enabled move (same state, same
    diagnostics), in every reachable state."""
    cfg = config(scenario, bugs, **params)
    machine = Machine(cfg)
    checked = 0
    for frozen in reachable_states(cfg):
        machine.thaw(frozen)
        ready = list(machine.ready)
        for local in ready:
            if local >= machine.n_agents:
                break
            kind = machine.code[local].kinds[machine.regs[local][PC]]
            if kind not in LOCAL_KINDS:
                continue
            alone, kinds = after(cfg, frozen, local)
            assert kinds[0] <= {"deadlock"}
            for other in ready:
                if other == local:
                    continue
                first, kinds_lo = after(cfg, frozen, local, other)
                second, kinds_ol = after(cfg, frozen, other, local)
                assert len(kinds_lo) == 2, "the local move disabled another move"
                # deadlock belongs to whichever move comes last; the final states are compared.
                assert kinds_lo[1] - {"deadlock"} == kinds_ol[0] - {"deadlock"}
                if second.status == RUNNING or len(kinds_ol) == 2:
                    assert len(kinds_ol) == 2, "another move disabled the local move"
                    assert without_tma_order(first.freeze()) == \
                        without_tma_order(second.freeze())
                checked += 1
            machine.thaw(frozen)
    assert checked > 0


def test_renamed_states_have_the_same_key_and_matching_successors():
    cfg = config("double_buffer_tma", ["wrong_arrival_count"], stages=1, tiles=2, consumers=2,
                 tile_bytes=2048)
    machine = Machine(cfg)
    canonical = Canonical(machine)
    assert canonical.groups == [(1, 2)]
    swap = (0, 2, 1)

    def successors(frozen, pend):
        machine.thaw(frozen)
        out = []
        for move in list(machine.ready):
            machine.thaw(frozen)
            kinds = frozenset(d["kind"] for d in machine.step(move)["diagnostics"])
            out.append((canonical.key(machine.freeze(), pend), kinds))
        return sorted(out)

    for frozen in reachable_states(cfg):
        pend = [0, 1, 0, (), ((0, 2),), ()]
        renamed, renamed_pend = canonical._renamed(frozen, pend, swap)
        assert canonical.key(frozen, pend) == canonical.key(renamed, list(renamed_pend))
        assert successors(frozen, pend) == successors(renamed, list(renamed_pend))


@pytest.mark.parametrize(("params", "bug"), [
    ({"stages": 1, "tiles": 2, "consumers": 3}, "wrong_arrival_count"),
    ({"stages": 2, "tiles": 3, "consumers": 3}, "forget_phase_toggle"),
    ({"stages": 2, "tiles": 2, "consumers": 4}, None),
])
def test_a_twin_agents_move_leads_to_its_first_twins_key(params, bug):
    """The moves the search skips (`Canonical.twins`) reach nothing new: in every state the
    reduced search stores, each twin's move gives the key, cost and diagnostic kinds its first
    twin's move gives."""
    explorer, out = explore("double_buffer_tma", [bug] if bug else [], tile_bytes=2048,
                            **params)
    canonical, machine = explorer.canonical, Machine(explorer.cfg)
    skipped = 0

    def successor(frozen, pend, move):
        machine.thaw(frozen)
        kinds = frozenset(d["kind"] for d in machine.step(move)["diagnostics"])
        after = list(pend)
        after[move] = 0
        if machine.status == RUNNING:
            close(machine, explorer.local, after, None, explorer.reads)
        return canonical.key(machine.freeze(), after), pend[move], kinds

    for key in out.keys:
        frozen, pend = canonical.decode(key)
        twins = canonical.twins(frozen, pend)
        machine.thaw(frozen)
        ready = list(machine.ready)
        for twin in twins:
            group = next(g for g in canonical.groups if twin in g)
            if twin not in ready:
                continue
            firsts = [a for a in group if a < twin and a in ready and a not in twins]
            assert any(successor(frozen, pend, a) == successor(frozen, pend, twin)
                       for a in firsts)
            skipped += 1
    assert skipped > 0


def test_keys_survive_decode_and_thaw():
    explorer, out = explore("double_buffer_tma", ["forget_phase_toggle"], stages=1, tiles=2,
                            consumers=2, tile_bytes=2048)
    machine = Machine(explorer.cfg)
    for key in out.keys:
        frozen, pend = explorer.canonical.decode(key)
        machine.thaw(frozen)
        assert explorer.canonical.key(machine.freeze(), pend) == key


STORES_ONLY = """\
tensor out[2] bytes 2048;
smem s[2] bytes 2048 chunk 1024;
barrier go = 2;
agent consumer[2] {
    mbarrier.arrive.shared::cta.b64 _, [go];
    mbarrier.try_wait.parity.shared::cta.b64 _, [go], 0;
    cp.async.bulk.global.shared::cta.bulk_group [out[rank]], [s[rank]], 2048;
    cp.async.bulk.commit_group;
    cp.async.bulk.wait_group.read 0;
}
"""
"""Bulk stores in a program that writes no shared memory: their reads are invisible."""

STORE_CONFIGS = [
    (STORES_ONLY, {}, []),
    (STORES_ONLY.replace("wait_group.read 0", "wait_group.read 1"), {}, ["read_1"]),
    (STORES_ONLY.replace("= 2;", "= 1;"), {}, ["count_1"]),
]


def test_store_reads_are_moves_where_shared_memory_is_written():
    """A load landing on chunks a store has not read is an `overwrite` that only a late read
    shows (core.unread_by_store), so a ring with loads keeps its reads as moves."""
    from app.check.model import store_reads_invisible

    for bugs in ([], ["wrong_arrival_count"]):
        machine = Machine(config("double_buffer_tma", bugs, stages=1, tiles=2))
        assert not store_reads_invisible(machine)


@pytest.mark.parametrize(("scenario", "params", "bugs"), STORE_CONFIGS,
                         ids=[(b or ["correct"])[0] for _, _, b in STORE_CONFIGS])
def test_store_reads_commute_with_every_other_move(scenario, params, bugs):
    """model.store_reads_invisible: a bulk store's chunk read raises nothing but deadlock,
    nothing disables it, and it commutes with every other enabled move, in every reachable
    state (the only move it may enable is its agent's wait_group)."""
    from app.check.model import store_reads_invisible
    from app.sim.core import OP_DIR, OP_WRITING, STORE

    from . import programs as p

    cfg = p.config(scenario)
    machine = Machine(cfg)
    assert store_reads_invisible(machine)
    checked = 0
    for frozen in reachable_states(cfg):
        machine.thaw(frozen)
        ready = list(machine.ready)
        n = machine.n_agents
        reads = [m for m in ready if n < m < machine.hold_base
                 and machine.tma[m - n - 1][OP_DIR] == STORE
                 and not machine.tma[m - n - 1][OP_WRITING]]
        for read in reads:
            _, kinds = after(cfg, frozen, read)
            assert kinds[0] <= {"deadlock"}
            for other in ready:
                if other == read:
                    continue
                machine.thaw(frozen)
                names = machine.moves()
                by_name = {}
                for order in ((read, other), (other, read)):
                    trial = Machine(cfg)
                    trial.thaw(frozen)
                    made = []
                    for move in order:  # TMA numbers shift when a copy ends: go by name
                        name = names[move]
                        if name not in trial.moves() or trial.status != RUNNING:
                            break
                        number = trial.resolve(name)
                        if number not in trial.ready:
                            break
                        made.append({d["kind"] for d in trial.step(number)["diagnostics"]})
                    by_name[order] = (trial, made)
                first, made_ro = by_name[(read, other)]
                second, made_or = by_name[(other, read)]
                assert len(made_ro) == 2 or first.status != RUNNING, "the read disabled a move"
                if len(made_ro) == 2 and len(made_or) == 2:
                    assert made_ro[1] - {"deadlock"} == made_or[0] - {"deadlock"}
                    assert without_tma_order(first.freeze()) == \
                        without_tma_order(second.freeze())
                    checked += 1
                else:
                    assert second.status != RUNNING or len(made_or) == 2, \
                        "another move disabled the read"
    assert checked > 0


def test_every_renaming_of_three_consumers_gets_the_same_key():
    """Full symmetry: one sort by the full signature is canonical for any number of identical
    agents (every one of the 3! renamings of every reachable state gets the same key)."""
    from itertools import permutations

    cfg = config("double_buffer_tma", ["wrong_arrival_count"], stages=1, tiles=2, consumers=3,
                 tile_bytes=2048)
    canonical = Canonical(Machine(cfg))
    assert canonical.groups == [(1, 2, 3)]
    pend = [0, 1, 0, 1, (), ((0, 2),), (), ((1, 1),)]
    renamings = [(0, *p) for p in permutations((1, 2, 3))]
    for number, frozen in enumerate(reachable_states(cfg)):
        if number % 7:
            continue
        keys = set()
        for perm in renamings:
            renamed, renamed_pend = canonical._renamed(frozen, pend, perm)
            keys.add(canonical.key(renamed, list(renamed_pend)))
        assert len(keys) == 1
