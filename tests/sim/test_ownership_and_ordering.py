"""The engine's rules on programs that leave the textbook ring (issue 17, items 3, 4, 6 and 8):
ownership from what the program does, CTA lifetime, memory ordering through `.sem`/`.scope`,
proxies, and `reuse_before_wait` for remote arrives. Each correct program is safe under every
schedule; each toggle reaches the diagnostic its comment names."""

from pathlib import Path

import pytest

from .semantics_helpers import kinds, reachable, run, source

CAPTURE_PIPELINES = Path(__file__).resolve().parents[2] / "app" / "capture" / "pipelines"

SAFE = [
    ("gemm_ab", {}),                                 # A and B stages released by one barrier
    ("gemm_ab", {"stages": 1, "tiles": 4}),
    ("dropout", {}),                                 # a consumer leaves with arrive_drop
    ("dropout", {"tiles": 10, "stay": 0}),
    ("split_ring", {}),                              # ping-pong consumers on a 3-stage ring
    ("split_ring", {"outputs": 4}),
    ("persistent_acc", {}),                          # acc_full / acc_empty handshake
    ("persistent_acc", {"outputs": 3, "kblocks": 1}),
    ("mma_proxy", {}),
    ("relaxed", {}),
    ("dsmem", {}),
]


@pytest.mark.parametrize(("name", "params"), SAFE,
                         ids=[f"{n}-{'-'.join(f'{k}{v}' for k, v in p.items())}"
                              for n, p in SAFE])
def test_correct_programs_are_safe_under_every_schedule(name, params):
    verdict, found = reachable(source(name), **params)
    assert (verdict, found) == ("safe", set())


UNSAFE = [
    ("gemm_ab", "early_release", {}, "overwrite"),
    ("dropout", "leave_without_drop", {}, "deadlock"),
    ("split_ring", "no_order", {}, "stale_wait"),
    ("persistent_acc", "no_acc_empty_wait", {}, "partial_read"),
    ("mma_proxy", "no_fence", {}, "proxy_fence_missing"),
    ("relaxed", "relaxed_arrive", {}, "ordering_race"),
    ("relaxed", "relaxed_wait", {}, "ordering_race"),
    ("dsmem", "cta_release", {}, "ordering_race"),
    ("dsmem", "cta_acquire", {}, "ordering_race"),
    ("dsmem", "no_done", {}, "remote_after_exit"),
]


@pytest.mark.parametrize(("name", "bug", "params", "kind"), UNSAFE,
                         ids=[f"{n}-{b}" for n, b, _, _ in UNSAFE])
def test_each_toggle_reaches_its_diagnostic(name, bug, params, kind):
    verdict, found = reachable(source(name), [bug], **params)
    assert verdict == "unsafe" and kind in found, found


def test_two_stage_arrays_released_by_one_barrier_run_clean():
    r = run(source("gemm_ab"))
    assert r.status == "done" and kinds(r) == []


def test_a_consumer_that_drops_out_is_owed_nothing_afterwards():
    r = run(source("dropout"), tiles=12, stay=1)
    assert r.status == "done" and kinds(r) == []


def test_a_stale_return_on_an_odd_ring_is_named_stale_wait():
    """Two consumers taking alternate tiles of a 3-stage ring each wait on a full barrier only
    every other phase: PTX's parity names only the current or the preceding phase, so a wait
    can return on the state before phase 0 (app/capture/pipelines/alternate_tiles.pipe)."""
    text = (CAPTURE_PIPELINES / "alternate_tiles.pipe").read_text()
    verdict, found = reachable(text, tiles=4)
    assert verdict == "unsafe" and {"stale_wait", "partial_read"} <= found
    verdict, found = reachable(text, tiles=4, stages=2)  # an even ring: every phase is seen
    assert (verdict, found) == ("safe", set())


def test_the_early_return_is_named_at_the_wait():
    text = (CAPTURE_PIPELINES / "alternate_tiles.pipe").read_text()
    moves = ["producer"] * 7 + ["tma:load:t1"] * 4 + ["consumer1"] * 4
    r = run(text, moves, tiles=8)
    stale = [d for d in r.diagnostics if d["kind"] == "stale_wait"]
    assert [d["step"] for d in stale] == [15] and stale[0]["agents"] == ["consumer1"]
    assert "phase 0 is already under way" in stale[0]["message"]


def test_a_producer_start_state_wait_is_not_stale():
    """Parity 1 at phase 0 is the producer's start state (make_producer_start_state): no
    diagnostic, even with an early arrival on the barrier the producer knows nothing of."""
    r = run(source("gemm_ab"))
    first = r.steps(1, 1)[0]
    assert first["agent"] == "producer" and first["operands"]["parity"] == 1
    assert first["diagnostics"] == []


def test_remote_arrives_are_held_to_reuse_before_wait():
    verdict, found = reachable(source("remote_reuse"))
    assert "reuse_before_wait" in found
    r = run(source("remote_reuse"), ["cta1.worker", "cta1.worker"])
    first = r.diagnostics[0]
    assert (first["kind"], first["step"], first["agents"]) == (
        "reuse_before_wait", 2, ["cta1.worker"])
    assert r.status == "deadlock"  # the waiter's parity 0 now names phase 2


def test_the_built_in_cluster_pipeline_needs_its_producer_tail():
    from app.scenarios import get

    cfg = get("cluster_multicast").resolve({"stages": 1, "tiles": 2}, ["no_producer_tail"])
    from app.check.engine import Explorer, Limits

    out = Explorer(cfg).explore(Limits(200_000, 600.0))
    assert "remote_after_exit" in out.found
    cfg = get("cluster_multicast").resolve({"stages": 1, "tiles": 2}, [])
    out = Explorer(cfg).explore(Limits(200_000, 600.0))
    assert out.verdict == "safe"


def test_a_relaxed_wait_orders_nothing():
    r = run(source("relaxed"), ["writer", "writer", "reader", "reader"], bugs=["relaxed_wait"])
    assert kinds(r) == ["ordering_race"] and r.diagnostics[0]["step"] == 4
    assert "orders nothing" in r.diagnostics[0]["message"]
