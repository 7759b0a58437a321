"""A stage a bulk store reads may be written again only once `cp.async.bulk.wait_group.read`
says the store has read it (PTX 9.7.9.27.2.2): a TMA load landing on it, or `st.shared` to it,
before then is an `overwrite`, found under every schedule (the read can always come later), and
the oracle's brute force agrees. Found as a false `safe` while writing the DeepEP#657 lesson."""

from app.scenarios import get

from ..check.oracle import shortest_kinds
from .semantics_helpers import config, kinds, reachable, run, source


def test_a_write_before_the_read_wait_is_an_overwrite():
    verdict, found = reachable(source("store_reuse"), ["write_before_read_wait"])
    assert verdict == "unsafe" and "overwrite" in found, found
    assert "overwrite" in shortest_kinds(config(source("store_reuse"),
                                                ["write_before_read_wait"]))


def test_the_write_after_the_read_wait_is_safe():
    assert reachable(source("store_reuse")) == ("safe", set())
    assert run(source("store_reuse")).status == "done"


def test_the_message_names_the_store_and_its_issuer():
    r = run(source("store_reuse"), bugs=["write_before_read_wait"],
            moves=["thread"] * 6)
    (diagnostic,) = [d for d in r.diagnostics if d["kind"] == "overwrite"]
    assert "bulk store of out[0] that thread issued" in diagnostic["message"]
    assert "overwrite" in kinds(r)


RING = get("double_buffer_tma").source
EARLY = RING.replace(
    "        cp.async.bulk.wait_group.read 0;   // the store has read smem[index]\n"
    "        consumer_release(pipe_state);\n",
    "        consumer_release(pipe_state);   // released before the store has read the stage\n"
    "        cp.async.bulk.wait_group.read 0;\n")


def test_a_ring_that_releases_before_the_read_wait_lets_a_load_overwrite():
    assert EARLY != RING
    params = {"stages": 1, "tiles": 2, "tile_bytes": 2048, "chunk_bytes": 1024}
    verdict, found = reachable(EARLY, **params)
    assert verdict == "unsafe" and "overwrite" in found, found
    truth = shortest_kinds(config(EARLY, **params))
    assert set(truth) == found
    assert reachable(RING, **params) == ("safe", set())
