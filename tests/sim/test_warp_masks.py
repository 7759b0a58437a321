"""`elect.sync` (PTX 9.7.13.14) and `bar.warp.sync` (9.7.13.2) with a membermask other than the
full one, in an agent of `lanes N`: each test states what the PTX text says and checks the
engine does it."""

from __future__ import annotations

import pytest

from .semantics_helpers import config, reachable, run


def registers(run_) -> list[dict]:
    return [a["registers"] for a in run_.snapshot(run_.total_steps)["agents"]]


def status(run_, step: int) -> list[str]:
    return [a["status"] for a in run_.snapshot(step)["agents"]]


def test_elect_waits_for_the_lanes_of_its_mask_only_and_elects_the_lowest():
    """"elect causes the executing thread to wait until all threads in the membermask execute
    the elect instruction"; "laneid of the elected thread is returned in ... d"."""
    text = """agent p lanes 3 { int d = 7; int p = 9;
        if (%laneid != 0) { elect.sync d|p, 0x6; } }"""
    r = run(text, moves=["p.lane2", "p.lane1"])
    assert status(r, 1)[2] == "waiting"
    assert r.status == "done" and r.total_steps == 2
    assert registers(r) == [{"d": 7, "p": 9}, {"d": 1, "p": 1}, {"d": 1, "p": 0}]
    event = r.steps(2, 2, snapshots=False)[0]["events"][-1]
    assert event["kind"] == "elect" and event["leader"] == 1 and event["membermask"] == 6


def test_a_mask_of_one_lane_elects_it_at_once():
    r = run("agent p lanes 2 { int d = 7; int p = 9; if (%laneid == 1) { elect.sync d|p, 0x2; } "
            "}")
    assert r.total_steps == 1 and registers(r)[1] == {"d": 1, "p": 1}


def test_unmodelled_lanes_of_the_mask_are_not_waited_for():
    """Lanes N..31 of a `lanes N` agent are not movers: their bits wait for no one."""
    r = run("agent p lanes 2 { int d = 7; int p = 9; elect.sync d|p, 0xff; }")
    assert r.status == "done" and registers(r) == [{"d": 0, "p": 1}, {"d": 0, "p": 0}]


def test_an_exited_lane_of_the_mask_is_not_elected():
    text = """agent p lanes 3 { int d = 7; int p = 9;
        if (%laneid != 0) { elect.sync d|p, 0x7; } }"""
    r = run(text)
    assert r.status == "done" and registers(r)[1:] == [{"d": 1, "p": 1}, {"d": 1, "p": 0}]


def test_a_lane_outside_its_own_mask_is_undefined():
    """"The behavior is undefined if the executing thread is not in membermask"."""
    r = run("agent p lanes 2 { int p = 0; elect.sync _|p, 0x2; }")
    assert r.status == "undefined_behavior"
    diag = r.diagnostics[-1]
    assert diag["rule"] == "warp_mask_self" and diag["agents"] == ["p.lane0"]
    assert "membermask 0x2" in diag["message"] and "9.7.13.14" in diag["message"]
    r = run("agent p lanes 2 { if (%laneid == 1) { bar.warp.sync 0x1; } }")
    assert r.diagnostics[-1]["rule"] == "warp_mask_self"
    assert "9.7.13.2" in r.diagnostics[-1]["message"]


def test_disjoint_masks_synchronize_separately():
    """Two pairs of lanes, each its own `bar.warp.sync`: neither waits for the other pair."""
    text = """agent w lanes 4 { int x = 0;
        if (%laneid < 2) { bar.warp.sync 0x3; } else { bar.warp.sync 0xc; }
        ++x; }"""
    r = run(text, moves=["w.lane0", "w.lane2", "w.lane3", "w.lane3"])
    assert status(r, 2) == ["waiting", "running", "waiting", "running"]
    assert status(r, 3) == ["waiting", "running", "running", "running"]  # lanes 2, 3 met
    assert status(r, 4) == ["waiting", "running", "running", "done"]  # lane 0 waits for 1
    assert reachable(text) == ("safe", set())


def test_lanes_with_different_masks_do_not_meet():
    """"until all threads corresponding to membermask have executed a bar.warp.sync with the
    same membermask value": lane 0 (mask 0x3) and lane 1 (mask 0x7) each wait for the other
    to come with its own mask, forever."""
    text = """agent w lanes 2 {
        if (%laneid == 0) { bar.warp.sync 0x3; } else { bar.warp.sync 0x7; } }"""
    r = run(text)
    assert r.status == "deadlock"
    message = r.diagnostics[-1]["message"]
    assert "membermask 0x3" in message and "waits at bar.warp.sync with membermask 0x7" in message


def test_a_partial_warp_sync_orders_the_memory_of_its_lanes_only():
    """9.7.13.2 "guarantee[s] memory ordering among threads participating in barrier"."""
    body = """
    tensor tile[1] bytes 1024;
    smem   s bytes 1024 chunk 1024;
    agent w lanes 3 {
        if (%laneid == WRITER) { st.shared.b32 [s], tile[0]; }
        if (%laneid < 2) { bar.warp.sync 0x3; } else { bar.warp.sync 0x4; }
        if (%laneid == 1) { ld.shared.b32 x, [s], tile[0]; }
    }
    """
    assert reachable(body.replace("WRITER", "0")) == ("safe", set())
    verdict, found = reachable(body.replace("WRITER", "2"))
    assert verdict == "unsafe" and "ordering_race" in found


@pytest.mark.parametrize("line", ["elect.sync _|p, 0x3;", "bar.warp.sync 0x3;"])
def test_the_reduced_search_finds_what_the_full_search_finds(line):
    from app.check.engine import Explorer, Limits

    text = f"""agent w lanes 3 {{ int p = 0; int y = 0;
        if (%laneid != 2) {{ {line} }} ++y; }}
    agent v {{ int z = 0; ++z; }}"""
    cfg = config(text)
    full = Explorer(cfg, reduce=False).explore(Limits(200_000, 600.0))
    reduced = Explorer(cfg, reduce=True).explore(Limits(200_000, 600.0))
    assert full.verdict == reduced.verdict == "safe"
    assert set(full.found) == set(reduced.found)
