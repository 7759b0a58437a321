"""What a line says is what the engine does: a built-in's source posted back gives the built-in's
trace, every bug toggle is the same trace as the same edit made by hand, and pipelines the
built-ins do not cover (a consumer releasing one stage behind, alternate tiles) run."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from app.main import create_app
from app.scenarios import catalogue, from_source, get
from app.sim.schedule import Schedule
from app.sim.trace import Run

CASES = [(s.id, bug) for s in catalogue().values() for bug in (None, *s.bugs)]
PARAMS = {"double_buffer_tma": {"stages": 2, "tiles": 4}, "kloop_tma_mma": {"tiles": 3},
          "cluster_multicast": {"tiles": 3}}


@pytest.fixture(scope="module")
def client():
    with TestClient(create_app(), raise_server_exceptions=False) as client:
        yield client


def by_hand(source: str, bug: str) -> str:
    """The toggle's patches made as a person would: plain text replacement in the program
    (the `bug` blocks at the end of the file are left as they are)."""
    head, sep, tail = source.partition("\nbug ")
    block = tail[tail.index(f"{bug} ") if not tail.startswith(f"{bug} ") else 0:]
    block = (sep + block if tail.startswith(f"{bug} ") else "\nbug " + block).split("\nbug ")[1]
    for line in block.splitlines()[1:]:
        line = line.strip()
        if line == "}":
            break
        scope = None
        if line.startswith("in "):
            scope, line = line.split(" ", 2)[1], line.split(" ", 2)[2]
        if line.startswith("delete "):
            old, new = line[len('delete "'):-2], ""
        else:
            old, new = line[len('replace "'):-2].split('" with "')
        start = head.index(f"agent {scope}") if scope else 0
        at = head.index(old, start)
        head = head[:at] + new + head[at + len(old):]
    return head + sep + tail


@pytest.mark.parametrize(("scenario_id", "bug"), CASES)
def test_built_in_source_posted_back_gives_the_same_trace(client, scenario_id, bug):
    params = PARAMS.get(scenario_id, {})
    bugs = [bug] if bug else []
    query = {**params, "bugs": ",".join(bugs), "schedule": "random", "seed": 5,
             "snapshots": "false"}
    built_in = client.get(f"/api/v1/traces/{scenario_id}", params=query).json()
    source = client.get(f"/api/v1/scenarios/{scenario_id}").json()["source"]
    posted = client.post("/api/v1/traces", json={
        "source": source, "params": params, "bugs": bugs, "schedule": "random", "seed": 5,
        "snapshots": False}).json()
    assert posted["scenario"]["id"] is None
    posted["scenario"]["id"] = scenario_id
    assert posted == built_in


@pytest.mark.parametrize(("scenario_id", "bug"), [c for c in CASES if c[1]])
def test_a_toggle_is_the_same_trace_as_its_edit_made_by_hand(scenario_id, bug):
    scenario = get(scenario_id)
    params = PARAMS.get(scenario_id, {})
    edited = from_source(by_hand(scenario.source, bug))
    assert edited.source != scenario.source
    for schedule in (Schedule("round_robin"), Schedule("random", seed=11)):
        toggled = scenario.resolve(params, [bug])
        by_edit = edited.resolve(params, [])
        a = Run.complete(toggled, schedule).document(snapshots=True)
        b = Run.complete(by_edit, schedule).document(snapshots=True)
        for doc in (a, b):
            doc.pop("scenario")
        # The toggle also says which lines it deleted (the UI strikes them through); what runs
        # is the same as the edit made by hand, which deletes nothing the engine can name.
        deleted = [agent.pop("deleted_lines", []) for agent in a["layout"]["agents"]]
        assert not any("deleted_lines" in agent for agent in b["layout"]["agents"])
        for agent in deleted:
            for line in agent:
                assert line["note"].startswith("//") and line["text"] not in line["note"][:2]
        assert a == b


ALTERNATE = """
param tiles = 6 in 1..100 "tiles";
tensor tile[tiles] bytes 2048;
smem smem[3] bytes 2048 chunk 1024 release empty_barrier;
barrier full_barrier[3] = 1;
barrier empty_barrier[3] = 1;

agent producer {
    PipelineState<3> pipe_state = make_producer_start_state();
    for (int k = 0; k < tiles; ++k) {
        producer_acquire(pipe_state, 2048);
        cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes
            [smem[pipe_state.index] + 0], [tile[k]], 1024, [full_barrier[pipe_state.index]];
        cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes
            [smem[pipe_state.index] + 1024], [tile[k]], 1024, [full_barrier[pipe_state.index]];
        ++pipe_state;
    }
}

// Two consumers take alternate tiles; each keeps its own PipelineState over the ring.
agent consumer[2] {
    PipelineState<3> pipe_state;
    for (int k = 0; k < tiles; ++k) {
        if (k % 2 == rank) {
            consumer_wait(pipe_state);
            ld.shared x, [smem[pipe_state.index]], tile[k];
            consumer_release(pipe_state);
        }
        ++pipe_state;
    }
}
"""


def test_alternate_tile_consumers_and_one_copy_per_chunk_run_clean():
    scenario = from_source(ALTERNATE)
    cfg = scenario.resolve({}, [])
    for seed in range(60):
        run = Run.complete(cfg, Schedule("random", seed=seed))
        assert run.status == "done"
        kinds = {d["kind"] for d in run.diagnostics}
        # The overwrite detector owes every tile of an array to every agent that reads the
        # array (docs/language.md), so readers that split tiles see it; no read is wrong.
        assert kinds <= {"overwrite"}, (seed, run.diagnostics)
        assert not kinds & {"partial_read", "stale_read", "stale_wait"}


RELEASE_BEHIND = """
param stages = 3 in 2..8 "stages";
param tiles = 6 in 1..100 "tiles";
tensor tile[tiles] bytes 1024;
smem smem[stages] bytes 1024 chunk 512 release empty_barrier;
barrier full_barrier[stages] = 1;
barrier empty_barrier[stages] = 1;

agent producer {
    PipelineState<stages> pipe_state = make_producer_start_state();
    for (int k = 0; k < tiles; ++k) {
        producer_acquire(pipe_state, 1024);
        cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes
            [smem[pipe_state.index]], [tile[k]], 1024, [full_barrier[pipe_state.index]];
        ++pipe_state;
    }
}

// The consumer releases one stage behind the one it waits on (two PipelineStates), with a
// prologue, a main loop and a tail, as CUTLASS's warp-specialized mainloops do.
agent consumer {
    PipelineState<stages> read_state;
    PipelineState<stages> release_state;
    consumer_wait(read_state);
    ld.shared x, [smem[read_state.index]], tile[0];
    ++read_state;
    for (int k = 1; k < tiles; ++k) {
        consumer_wait(read_state);
        ld.shared x, [smem[read_state.index]], tile[k];
        ++read_state;
        consumer_release(release_state);
        ++release_state;
    }
    consumer_release(release_state);
}
"""


def test_a_consumer_that_releases_one_stage_behind_is_clean():
    cfg = from_source(RELEASE_BEHIND).resolve({}, [])
    for seed in range(60):
        run = Run.complete(cfg, Schedule("random", seed=seed))
        assert (run.status, run.diagnostics) == ("done", [])


def test_a_shift_by_a_register_is_bounded_at_run_time():
    text = ("barrier b = 1;\nagent a {\n    int x = 3;\n    for (int i = 0; i < 2; ++i) {\n"
            "        x = 1 << (x * 40);\n        mbarrier.arrive.shared::cta.b64 _, [b];\n"
            "    }\n}\n")
    run = Run.complete(from_source(text).resolve({}, []), Schedule("round_robin"))
    assert run.status == "undefined_behavior"
    assert run.diagnostics[-1]["rule"] == "operand_range"
    assert "shifts are 0..62" in run.diagnostics[-1]["message"]


def test_check_takes_a_pipeline_text(client):
    source = get("double_buffer_tma").source
    body = {"source": source, "params": {"stages": 1, "tiles": 2}, "bugs": ["expect_tx_short"]}
    answer = client.post("/api/v1/check", json=body).json()
    assert answer["verdict"] == "unsafe" and answer["complete"] is True
    kinds = {v["kind"] for v in answer["violations"]}
    assert {"tx_mismatch", "partial_read", "deadlock"} <= kinds
    trace = answer["violations"][0]["trace"]
    assert trace["scenario"]["id"] is None and len(trace["scenario"]["source_sha256"]) == 64
    broken = client.post("/api/v1/check", json={"source": source.replace("++pipe_state;", "++")})
    assert broken.status_code == 422 and broken.json()["detail"][0]["line"] >= 1
    both = client.post("/api/v1/check", json={"source": source, "scenario": "single_barrier"})
    assert both.status_code == 422
