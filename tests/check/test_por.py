"""The partial-order reduction (app/check/por.py) is sound: searched with it, every cluster
configuration (the built-in scenario and its toggles, CUTLASS's warp-specialized test, seeded
mutations of both) gets the verdict, the reachable kinds and the shortest lengths it gets without
it; the independence the reduction rests on holds move by move in every reachable state of small
configurations; and the sets it picks are persistent there (no sequence of other moves touches
what their moves touch). Every search is bounded by states, never by the clock."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from app.check.engine import Explorer, Limits
from app.check.model import Canonical, new_pend
from app.check.por import Independence
from app.scenarios import from_source, get
from app.sim.machine import RUNNING, UNDEFINED, Machine

from .helpers import STATE_BOUND, lengths

PIPELINES = Path(__file__).resolve().parents[2] / "bench" / "pipelines"


def cluster_source() -> str:
    path = Path(__file__).resolve().parents[2] / "app" / "scenarios" / "cluster_multicast.pipe"
    return path.read_text()


def ws_source(name: str) -> str:
    return (PIPELINES / f"{name}.pipe").read_text()


def answers(cfg, limits: Limits = STATE_BOUND) -> tuple:
    """(verdict, kinds and shortest lengths) with the reduction and without it; the first
    search's Explorer is returned too."""
    with_por = Explorer(cfg)
    assert with_por.independence is not None, "the reduction does not apply to this program"
    reduced = with_por.explore(limits)
    plain = Explorer(cfg, por=False).explore(limits)
    assert reduced.complete and plain.complete
    return (reduced.verdict, lengths(reduced)), (plain.verdict, lengths(plain)), reduced, plain


BUILT_IN = [
    ({"stages": 1, "tiles": 1}, []), ({"stages": 1, "tiles": 2}, []),
    ({"stages": 2, "tiles": 1}, []),
    ({"stages": 1, "tiles": 2}, ["release_local_only"]),
    ({"stages": 2, "tiles": 1}, ["release_local_only"]),
    ({"stages": 1, "tiles": 1}, ["expect_tx_one_cta"]),
    ({"stages": 1, "tiles": 1}, ["no_producer_tail"]),
    ({"stages": 1, "tiles": 2}, ["no_producer_tail"]),
    ({"stages": 2, "tiles": 1}, ["no_producer_tail"]),
    ({"stages": 1, "tiles": 2, "chunk_bytes": 2048}, ["release_local_only"]),
]


@pytest.mark.parametrize(("params", "bugs"), BUILT_IN,
                         ids=[f"{p}-{b}" for p, b in BUILT_IN])
def test_cluster_multicast_agrees(params, bugs):
    cfg = get("cluster_multicast").resolve(params, bugs)
    reduced, plain, out, full = answers(cfg)
    assert reduced == plain
    assert out.persistent_states <= full.states
    for kind in out.found:
        assert out.is_shortest(kind)


WS = [
    ("ws_2x1", {"stages": 2, "iterations": 1}, []),
    ("ws_2x1", {"stages": 2, "iterations": 3}, []),
    ("ws_2x1", {"stages": 3, "iterations": 4}, []),
    ("ws_2x1", {"stages": 2, "iterations": 1}, ["no_producer_tail"]),
    ("ws_2x1", {"stages": 2, "iterations": 3}, ["no_producer_tail"]),
    ("ws_2x1", {"stages": 2, "iterations": 3}, ["tail_from_start"]),
    ("ws_2x2", {"stages": 2, "iterations": 1}, []),
    pytest.param("ws_2x2", {"stages": 2, "iterations": 1}, ["no_producer_tail"],
                 marks=pytest.mark.slow),
    pytest.param("ws_4x1", {"stages": 2, "iterations": 1}, [], marks=pytest.mark.slow),
    pytest.param("ws_4x1", {"stages": 2, "iterations": 1}, ["tail_from_start"],
                 marks=pytest.mark.slow),
]


@pytest.mark.parametrize(("name", "params", "bugs"), WS)
def test_cutlass_ws_agrees(name, params, bugs):
    cfg = from_source(ws_source(name)).resolve(params, bugs)
    reduced, plain, out, full = answers(cfg)
    assert reduced == plain
    assert out.persistent_states <= full.states


def test_the_reduction_reduces():
    """Not a soundness fact, but the point: the CTAs' landings are not interleaved."""
    cfg = get("cluster_multicast").resolve({"stages": 2, "tiles": 1}, [])
    _, _, out, full = answers(cfg)
    assert out.persistent_states * 2 < full.states


def test_a_wait_takes_the_tiles_of_its_own_stage():
    """`smem[pipe_state.index]` and `full_barrier[pipe_state.index]` name the same index in
    every state: a wait on a full barrier takes the tiles of its own stage, in its own CTA."""
    cfg = get("cluster_multicast").resolve({"stages": 3, "tiles": 3}, [])
    independence = Independence(Machine(cfg))
    program = cfg.program
    for b, barrier in enumerate(program.barriers):
        stages = [s for s in range(len(program.stages))
                  if independence.stages_of[b] & independence._stage(s)]
        if barrier.array == "full_barrier":
            index = int(barrier.name.rsplit("[", 1)[1].rstrip("]"))
            assert stages == [s for s, st in enumerate(program.stages)
                              if st.cta == barrier.cta and st.index == index], barrier.name
        else:
            assert stages == []


@pytest.mark.parametrize("params", [{}, {"stages": 3, "tiles": 6}])
def test_cluster_multicast_is_decided_in_few_states(params):
    """Issue 19's point, bounded by states: the built-in cluster lesson at its defaults and at
    stages 3 / tiles 6 is decided within 20,000 states (the plain search needs over 130,000
    at the defaults)."""
    cfg = get("cluster_multicast").resolve(params, [])
    out = Explorer(cfg).explore(Limits(max_states=20_000, timeout_s=3600))
    assert out.complete and out.verdict == "safe"


def test_plain_search_agrees_on_the_smallest():
    """Against the search with no reduction at all (no closures, no symmetry)."""
    for bugs in ([], ["release_local_only"], ["no_producer_tail"], ["expect_tx_one_cta"]):
        cfg = get("cluster_multicast").resolve({"stages": 1, "tiles": 1}, bugs)
        out = Explorer(cfg).explore(STATE_BOUND)
        plain = Explorer(cfg, reduce=False).explore(STATE_BOUND)
        assert (out.verdict, lengths(out)) == (plain.verdict, lengths(plain)), bugs


# ------------------------------------------------------------------ generated programs

MUTATIONS = [
    ("barrier empty_barrier[stages] = 2;", ["barrier empty_barrier[stages] = 1;",
                                            "barrier empty_barrier[stages] = 3;"]),
    ("barrier full_barrier[stages] = 1;", ["barrier full_barrier[stages] = 2;"]),
    ("[full_barrier[pipe_state.index]], 3;", ["[full_barrier[pipe_state.index]], 1;",
                                              "[full_barrier[pipe_state.index]], 2;"]),
    ("producer_acquire(pipe_state, tile_bytes);",
     ["producer_acquire(pipe_state, tile_bytes / 2);",
      "producer_acquire(pipe_state, tile_bytes * 2);"]),
    ("ld.shared x, [smem[pipe_state.index]], tile[k];   // use the tile", [""]),
    ("        consumer_release(pipe_state);\n", [""]),
    ("mbarrier.arrive.release.cluster.shared::cluster.b64",
     ["mbarrier.arrive.relaxed.cluster.shared::cluster.b64",
      "mbarrier.arrive.release.cta.shared::cluster.b64"]),
    ("consumer_wait(pipe_state);", ["consumer_wait(pipe_state); consumer_wait(pipe_state);"]),
]


def mutant(seed: int) -> tuple[str, dict, list[str]]:
    rng = random.Random(seed)
    source = cluster_source()
    for old, news in MUTATIONS:
        if rng.random() < 0.3:
            source = source.replace(old, rng.choice(news))
    params = {"stages": rng.choice([1, 1, 2]), "tiles": rng.choice([1, 2, 2, 3]),
              "chunk_bytes": rng.choice([1024, 2048])}
    if params["stages"] == 2 and params["tiles"] == 3:
        params["tiles"] = 2
    bugs = [b for b in ("release_local_only", "expect_tx_one_cta", "no_producer_tail")
            if rng.random() < 0.2]
    return source, params, bugs


GENERATED = list(range(24))
GENERATED_BOUND = Limits(max_states=15_000, timeout_s=3600)


@pytest.mark.parametrize("seed", GENERATED)
def test_generated_cluster_programs_agree(seed):
    source, params, bugs = mutant(seed)
    try:
        cfg = from_source(source).resolve(params, bugs)
    except Exception:  # noqa: BLE001 (a mutation a toggle no longer applies to)
        cfg = from_source(source).resolve(params, [])
    plain = Explorer(cfg, por=False).explore(GENERATED_BOUND)
    if not plain.complete:
        pytest.skip("beyond the state bound")
    # both passes together never store more than twice what the plain search does
    out = Explorer(cfg).explore(Limits(max_states=2 * GENERATED_BOUND.max_states,
                                       timeout_s=3600))
    assert out.complete
    assert (out.verdict, lengths(out)) == (plain.verdict, lengths(plain)), (params, bugs)


def test_the_generator_draws_both_verdicts():
    verdicts = set()
    for seed in GENERATED[:12]:
        source, params, bugs = mutant(seed)
        try:
            cfg = from_source(source).resolve(params, bugs)
        except Exception:  # noqa: BLE001
            cfg = from_source(source).resolve(params, [])
        verdicts.add(Explorer(cfg).explore(GENERATED_BOUND).verdict)
    assert verdicts == {"safe", "unsafe"}


# ------------------------------------------------------------------ the facts it rests on

def reachable(cfg, limit: int = 20_000) -> list[tuple]:
    machine = Machine(cfg)
    start = machine.freeze()
    seen, todo = {start}, [start]
    while todo and len(seen) < limit:
        frozen = todo.pop()
        machine.thaw(frozen)
        for move in list(machine.ready):
            machine.thaw(frozen)
            machine.step(move)
            after = machine.freeze()
            if machine.status == RUNNING and after not in seen:
                seen.add(after)
                todo.append(after)
    return list(seen)


def mover_of(machine: Machine, move: int) -> str:
    name = machine.moves()[move]
    return name[:-len(":hold")] if name.endswith(":hold") else name


def step_from(machine: Machine, frozen: tuple, moves: list[str]):
    """Make the moves named (by mover name, a hold by its own name) from `frozen`; the key of
    where they lead and each move's diagnostic kinds, or None where one is not enabled."""
    machine.thaw(frozen)
    kinds = []
    for name in moves:
        if machine.status != RUNNING:
            return None
        names = machine.moves()
        if name not in names or names.index(name) not in machine.ready:
            return None
        record = machine.step(names.index(name))
        at_stop = machine.stop_report if machine.status == "deadlock" else ()
        # a deadlock is the state's, reported with whichever move reached it
        kinds.append(sorted(d["kind"] for d in record["diagnostics"]
                            if not any(d is x for x in at_stop)))
    return machine.freeze(), kinds


SMALL = [
    get("cluster_multicast").resolve({"stages": 1, "tiles": 1}, []),
    get("cluster_multicast").resolve({"stages": 1, "tiles": 2}, ["release_local_only"]),
    get("cluster_multicast").resolve({"stages": 1, "tiles": 1}, ["no_producer_tail"]),
    get("cluster_multicast").resolve({"stages": 2, "tiles": 3}, []),
    get("cluster_multicast").resolve({"stages": 2, "tiles": 2, "chunk_bytes": 512},
                                     ["release_local_only"]),
    get("cluster_multicast").resolve({"stages": 1, "tiles": 2}, ["expect_tx_one_cta"]),
    # a barrier that announces half of what lands on it: its phase completes with one copy
    # in flight (PersistentSets.landings: not exact)
    from_source(cluster_source().replace("producer_acquire(pipe_state, tile_bytes);",
                                         "producer_acquire(pipe_state, tile_bytes / 2);"))
    .resolve({"stages": 1, "tiles": 2}, []),
    from_source(ws_source("ws_2x1")).resolve({"stages": 2, "iterations": 2}, []),
    from_source(ws_source("ws_2x1")).resolve({"stages": 2, "iterations": 1},
                                             ["no_producer_tail"]),
]


@pytest.mark.parametrize("cfg", SMALL, ids=range(len(SMALL)))
def test_moves_the_model_calls_independent_commute(cfg):
    """In every reachable state: two enabled moves of different movers whose footprints do not
    conflict commute (the same state, the copies in any order), each raises the same kinds in
    either order, and neither disables the other."""
    machine = Machine(cfg)
    independence = Independence(machine)
    pairs = 0
    for frozen in reachable(cfg):
        machine.thaw(frozen)
        ready = list(machine.ready)
        names = machine.moves()
        footprint = {}
        flags = (independence.landings(machine) or ((),))[0]
        for move in ready:
            if move < machine.n_agents:
                footprint[move] = independence._completing(independence._line(
                    move, machine.regs[move][0], machine.regs[move]), machine.barriers)
            else:
                k = (move - machine.n_agents - 1) % len(machine.tma)
                footprint[move] = independence.copy(machine.tma[k], *flags[k])
        for i, u in enumerate(ready):
            for v in ready[i + 1:]:
                if mover_of(machine, u) == mover_of(machine, v):
                    continue
                if footprint[u] & independence.flip(footprint[v]):
                    continue
                one = step_from(machine, frozen, [names[u], names[v]])
                two = step_from(machine, frozen, [names[v], names[u]])
                machine.thaw(frozen)
                if one is None or two is None:
                    # only a stopped run disables: and the model then expands fully
                    assert machine.status == RUNNING
                    stopped = [x for x in (u, v) if _stops(machine, frozen, x)]
                    assert stopped, (names[u], names[v])
                    continue
                pairs += 1
                assert _same_but_copy_order(one[0], two[0]), (names[u], names[v])
                assert one[1] == two[1][::-1], (names[u], names[v])
    assert pairs > 0


def _stops(machine: Machine, frozen: tuple, move: int) -> bool:
    machine.thaw(frozen)
    machine.step(move)
    stopped = machine.status == UNDEFINED
    machine.thaw(frozen)
    return stopped


def seeded_sets(independence: Independence, machine: Machine, frozen: tuple):
    """The smallest set, then the sets grown from each mover that can move, cut at first
    waits and at the deepest (every one of them must be persistent, not only the one the
    search takes)."""
    machine.thaw(frozen)
    yield independence.persistent(machine)
    seeds = sorted({move if move < machine.n_agents
                    else machine.n_agents + (move - machine.n_agents - 1) % len(machine.tma)
                    for move in machine.ready})
    for seed in seeds:
        for deep in (False, True):
            machine.thaw(frozen)
            yield independence.persistent(machine, seeds=[seed], depths=(deep,))


@pytest.mark.parametrize("cfg", SMALL, ids=range(len(SMALL)))
def test_chosen_sets_are_persistent(cfg):
    """In every reachable state: along every sequence of moves of movers outside the chosen
    set (up to the state bound), each chosen move stays enabled and commutes with the move
    made (same state after both orders, same kinds); for the smallest set and for the set
    grown from each seed."""
    machine = Machine(cfg)
    independence = Independence(machine)
    checked = 0
    sets = [(state, chosen) for state in reachable(cfg, limit=300)
            for chosen in list(seeded_sets(independence, machine, state))]
    for frozen, chosen in sets:
        if chosen is None:
            continue
        machine.thaw(frozen)
        if any(_stops(machine, frozen, m) for m in chosen):
            continue  # the search expands such a state fully (expand.successors)
        machine.thaw(frozen)
        names = machine.moves()
        members = {mover_of(machine, m) for m in chosen}
        t_moves = [names[m] for m in chosen]
        seen, todo = {frozen}, [frozen]
        while todo and len(seen) < 120:
            state = todo.pop()
            machine.thaw(state)
            if machine.status != RUNNING:
                continue
            for move in list(machine.ready):
                machine.thaw(state)
                if mover_of(machine, move) in members:
                    continue
                outside = machine.moves()[move]
                if _stops(machine, state, move):
                    # it ends every run here, so it is the last move of any schedule through
                    # it: made after a chosen move it must raise what it raises first
                    for t in t_moves:
                        one = step_from(machine, state, [t, outside])
                        first = step_from(machine, state, [outside])
                        assert one is not None and one[1][1] == first[1][0], (t, outside)
                        checked += 1
                    continue
                for t in t_moves:
                    one = step_from(machine, state, [t, outside])
                    two = step_from(machine, state, [outside, t])
                    assert one is not None and two is not None, (t, outside)
                    assert one[0] == two[0] or _same_but_copy_order(one[0], two[0]), (t, outside)
                    assert one[1] == two[1][::-1], (t, outside)
                    checked += 1
                machine.thaw(state)
                machine.step(move)
                after = machine.freeze()
                if after not in seen:
                    seen.add(after)
                    todo.append(after)
    assert checked > 0


@pytest.mark.parametrize("cfg", SMALL, ids=range(len(SMALL)))
def test_remembered_sets_are_the_sets(cfg):
    """`persistent_of` (the set remembered by what it reads) is `persistent` computed afresh,
    named by part numbers or by the parts themselves, in every reachable state."""
    assert remembered_sets(cfg) >= 0


def test_some_sets_are_remembered():
    """States that differ only where `persistent` does not read (chunk cursors, counts) share
    one remembered set."""
    assert remembered_sets(SMALL[1]) > 0


def remembered_sets(cfg) -> int:
    """How many reachable states took their set from another's (each checked afresh)."""
    machine, plain = Machine(cfg), Machine(cfg)
    canonical = Canonical(machine)
    by_number, by_part = Independence(machine), Independence(machine)
    fresh = Independence(plain)
    pend = new_pend(machine.n_agents)
    states = 0
    for state in reachable(cfg, limit=600):
        frozen, _, numbers = canonical.decode_numbers(canonical.plain(state, pend))
        plain.thaw(frozen)
        fresh._ahead.clear()
        want = fresh.persistent(plain)
        machine.thaw(frozen)
        ready = list(machine.ready)
        assert by_number.persistent_of(machine, frozen, ready, numbers) == want
        assert by_part.persistent_of(machine, frozen, ready) == want
        states += 1
    return states - len(by_number._sets)


def _same_but_copy_order(a: tuple, b: tuple) -> bool:
    return (a[:5] == b[:5] and sorted(a[5]) == sorted(b[5]) and a[6:] == b[6:])


@pytest.mark.parametrize("bugs", [["release_local_only"], ["no_producer_tail"], []])
def test_stop_at_first_agrees(bugs):
    """`stop_at_first`: the first pass stops at its first violation and the second answers
    the shortest one, as the search without the reduction does."""
    cfg = get("cluster_multicast").resolve({"stages": 1, "tiles": 2}, bugs)
    limits = Limits(max_states=200_000, timeout_s=3600, stop_at_first=True)
    out = Explorer(cfg).explore(limits)
    plain = Explorer(cfg, por=False).explore(limits)
    assert (out.verdict, lengths(out), out.stopped_by) == \
        (plain.verdict, lengths(plain), plain.stopped_by)
    assert all(out.is_shortest(kind) for kind in out.found)
