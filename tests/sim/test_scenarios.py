"""Every scenario x bug toggle: the diagnostic the toggle causes appears at the step where the
failure happens, under a schedule that triggers it; correct configurations stay clean."""

import pytest

from app.scenarios import catalogue, get
from app.sim.schedule import Schedule
from app.sim.trace import Run


def run_of(scenario_id, bugs=(), schedule=Schedule("round_robin"), **params):
    scenario = get(scenario_id)
    cfg = scenario.resolve(params, list(bugs))
    return Run.complete(cfg, schedule, scenario.describe(cfg))


def first_triggering(scenario_id, bugs, kind, seeds=300, **params):
    """The first schedule (round robin, then random seeds) under which `kind` shows up."""
    schedules = [Schedule("round_robin")] + [Schedule("random", seed=s) for s in range(seeds)]
    for schedule in schedules:
        run = run_of(scenario_id, bugs, schedule, **params)
        found = [d for d in run.diagnostics if d["kind"] == kind]
        if found:
            return run, found[0]
    raise AssertionError(f"no schedule shows {kind} for {scenario_id} with {bugs}")


def record_at(run, step):
    return run.steps(step, step, snapshots=True)[0]


# (scenario, toggle, params, expected diagnostic, who moves at that step, op prefix)
CASES = [
    ("single_barrier", "forget_phase_toggle", {}, "stale_wait", "thread", "mbarrier.try_wait"),
    ("single_barrier", "forget_phase_toggle", {}, "partial_read", "thread", "ld.shared"),
    ("single_barrier", "expect_tx_short", {}, "partial_read", "thread", "ld.shared"),
    ("single_barrier", "expect_tx_long", {}, "deadlock", None, None),
    ("double_buffer_tma", "forget_phase_toggle", {"stages": 2, "tiles": 4}, "stale_wait",
     "consumer0", "mbarrier.try_wait"),
    ("double_buffer_tma", "forget_phase_toggle", {"stages": 2, "tiles": 4}, "deadlock", None,
     None),
    ("double_buffer_tma", "forget_producer_phase_toggle", {"stages": 2, "tiles": 4},
     "stale_wait", "producer", "mbarrier.try_wait"),
    ("double_buffer_tma", "forget_producer_phase_toggle", {"stages": 2, "tiles": 4},
     "overwrite", "tma", "cp.async.bulk"),
    ("double_buffer_tma", "expect_tx_short", {"stages": 2, "tiles": 4}, "partial_read",
     "consumer0", "ld.shared"),
    ("double_buffer_tma", "expect_tx_long", {"stages": 2, "tiles": 4}, "deadlock", None, None),
    ("double_buffer_tma", "consumer_skips_release", {"stages": 2, "tiles": 4}, "deadlock",
     None, None),
    ("double_buffer_tma", "producer_skips_empty_wait", {"stages": 2, "tiles": 4}, "overwrite",
     "tma", "cp.async.bulk"),
    ("double_buffer_tma", "wrong_arrival_count", {"stages": 2, "tiles": 4, "consumers": 2},
     "overwrite", "tma", "cp.async.bulk"),
    ("kloop_tma_mma", "forget_phase_toggle", {"stages": 2, "tiles": 4}, "stale_wait", "mma",
     "mbarrier.try_wait"),
    ("kloop_tma_mma", "forget_producer_phase_toggle", {"stages": 2, "tiles": 4}, "overwrite",
     "tma", "cp.async.bulk"),
    ("kloop_tma_mma", "expect_tx_short", {"stages": 2, "tiles": 4}, "partial_read",
     "tensor_core", "tcgen05.mma"),
    ("kloop_tma_mma", "expect_tx_long", {"stages": 2, "tiles": 4}, "deadlock", None, None),
    ("kloop_tma_mma", "missing_mma_commit", {"stages": 2, "tiles": 4}, "deadlock", None, None),
    ("kloop_tma_mma", "producer_skips_empty_wait", {"stages": 2, "tiles": 4}, "overwrite", "tma",
     "cp.async.bulk"),
    ("kloop_tma_mma", "missing_tcgen05_fence", {"stages": 2, "tiles": 4}, "tcgen05_ld_race",
     "epilogue", "tcgen05.ld"),
    ("kloop_tma_mma", "missing_tcgen05_wait", {"stages": 2, "tiles": 4}, "tcgen05_ld_race",
     "epilogue", "st.global"),
    ("proxy_fence_store", "missing_proxy_fence", {"stages": 2, "tiles": 4},
     "proxy_fence_missing", "tma", "cp.async.bulk"),
    ("cluster_multicast", "release_local_only", {"stages": 1, "tiles": 3}, "overwrite", "tma",
     "cp.async.bulk"),
    ("cluster_multicast", "expect_tx_one_cta", {"stages": 2, "tiles": 3}, "partial_read",
     "cta1.consumer", "ld.shared"),
    ("cluster_multicast", "no_producer_tail", {"stages": 2, "tiles": 4}, "remote_after_exit",
     "cta1.consumer", "mbarrier.arrive"),
]


@pytest.mark.parametrize(("scenario_id", "bug", "params", "kind", "mover", "op"), CASES,
                         ids=[f"{c[0]}-{c[1]}-{c[3]}" for c in CASES])
def test_toggle_causes_its_diagnostic_at_the_failing_step(scenario_id, bug, params, kind, mover,
                                                          op):
    run, diagnostic = first_triggering(scenario_id, [bug], kind, **params)
    record = record_at(run, diagnostic["step"])
    assert diagnostic in record["diagnostics"]
    assert diagnostic["message"]
    if kind == "deadlock":
        assert diagnostic["step"] == run.total_steps
        assert run.status == "deadlock"
        assert record["snapshot"]["status"] == "deadlock"
        assert any(a["status"] == "waiting" for a in record["snapshot"]["agents"])
    else:
        assert record["agent"] == mover
        assert record["op"].startswith(op)
    clean = run_of(scenario_id, (), Schedule(**run.schedule.as_dict()), **params)
    assert clean.diagnostics == [], "the same schedule is clean without the bug"


def test_every_accepted_toggle_is_covered():
    """The real-bug lessons are covered by tests/lessons/test_real_bugs.py."""
    covered = {(c[0], c[1]) for c in CASES}
    for scenario in catalogue().values():
        if scenario.group == "real_bugs":
            continue
        for bug in scenario.bugs:
            assert (scenario.id, bug) in covered


def test_forget_phase_toggle_wait_returns_on_tile_0_completion_while_tile_2_is_missing():
    """The issue's example, as a manual schedule: stages 2, tiles 4, a consumer that races ahead."""
    tile = ["tma"] * 4
    store = ["tma"] * 4
    consume = ["consumer0"] * 4 + store + ["consumer0"] * 3
    produce = ["producer"] * 4
    moves = produce + tile + produce + tile + consume + consume + ["producer"] * 3 + ["tma"]
    moves += ["consumer0", "consumer0"]
    run = run_of("double_buffer_tma", ["forget_phase_toggle"],
                 Schedule("manual", moves=tuple(moves)), stages=2, tiles=4)
    wait_step = len(moves) - 1
    wait = record_at(run, wait_step)
    assert (wait["agent"], wait["operands"]) == (
        "consumer0", {"barrier": "full_barrier[0]", "parity": 0, "phases_needed": 2})
    assert [d["kind"] for d in wait["diagnostics"]] == ["stale_wait"]
    full0 = wait["snapshot"]["barriers"][0]
    assert (full0["phase"], full0["tx_count"]) == (1, 3072), "tile 2 has 3 of 4 chunks to land"
    read = record_at(run, wait_step + 1)
    assert [d["kind"] for d in read["diagnostics"]] == ["partial_read"]
    assert read["events"][0] == {"kind": "smem_read", "stage": "smem[0]", "tile": 2,
                                 "chunks_ok": 1, "chunks": 4}


@pytest.mark.parametrize(("scenario_id", "bug", "params"), [
    ("double_buffer_tma", "forget_phase_toggle", {"stages": 4, "tiles": 4}),
    ("double_buffer_tma", "forget_producer_phase_toggle", {"stages": 3, "tiles": 3}),
    ("double_buffer_tma", "consumer_skips_release", {"stages": 3, "tiles": 3}),
    ("double_buffer_tma", "wrong_arrival_count", {"stages": 2, "tiles": 5, "consumers": 1}),
    ("kloop_tma_mma", "forget_phase_toggle", {"stages": 3, "tiles": 2}),
])
def test_harmless_where_it_cannot_bite(scenario_id, bug, params):
    for seed in range(100):
        run = run_of(scenario_id, [bug], Schedule("random", seed=seed), **params)
        assert run.status == "done" and run.diagnostics == [], (seed, run.diagnostics)


CORRECT = [
    ("single_barrier", {"tiles": 5}),
    ("single_barrier", {"tiles": 2, "tile_bytes": 256, "chunk_bytes": 16}),
    ("double_buffer_tma", {"stages": 1, "tiles": 4}),
    ("double_buffer_tma", {"stages": 2, "tiles": 6}),
    ("double_buffer_tma", {"stages": 3, "tiles": 7, "consumers": 2}),
    ("double_buffer_tma", {"stages": 2, "tiles": 5, "consumers": 4, "chunk_bytes": 2048}),
    ("kloop_tma_mma", {"stages": 1, "tiles": 3}),
    ("kloop_tma_mma", {"stages": 3, "tiles": 6}),
    ("proxy_fence_store", {"stages": 1, "tiles": 3}),
    ("proxy_fence_store", {"stages": 3, "tiles": 6}),
    ("cluster_multicast", {"stages": 1, "tiles": 3}),
    ("cluster_multicast", {"stages": 2, "tiles": 5}),
]


@pytest.mark.parametrize(("scenario_id", "params"), CORRECT)
def test_correct_configurations_are_clean_under_200_random_schedules(scenario_id, params):
    for seed in range(200):
        run = run_of(scenario_id, (), Schedule("random", seed=seed), **params)
        assert run.status == "done", (seed, run.status)
        assert run.diagnostics == [], (seed, run.diagnostics)


def test_single_barrier_phase_toggles_0_1_0_over_three_iterations():
    run = run_of("single_barrier", (), tiles=3)
    parities = []
    for record in run.steps(1, run.total_steps):
        for event in record["events"]:
            if event["kind"] == "wait_returned":
                parities.append(event["parity"])
    assert parities == [0, 1, 0]
    last = run.snapshot(run.total_steps)
    assert last["barriers"][0]["phase"] == 3 and last["barriers"][0]["parity"] == 1


@pytest.mark.parametrize("scenario_id", ["double_buffer_tma", "kloop_tma_mma"])
def test_a_short_announcement_shows_tx_mismatch_in_every_trace(scenario_id):
    outcomes = set()
    for seed in range(60):
        run = run_of(scenario_id, ["expect_tx_short"], Schedule("random", seed=seed),
                     stages=2, tiles=3)
        kinds = [d["kind"] for d in run.diagnostics]
        assert kinds and kinds[0] == "tx_mismatch", (seed, kinds)
        outcomes.add("partial_read" if "partial_read" in kinds else run.status)
    assert {"partial_read", "deadlock"} <= outcomes, outcomes
