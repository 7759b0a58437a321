"""State tokens name their barrier and phase, a thread's complete_tx counts in the tx ledger,
`.noComplete` is undefined behaviour when it completes the phase (issue 17, item 5)."""

from .semantics_helpers import kinds, run, source


def test_a_token_answers_for_its_own_barrier():
    r = run(source("tokens"))
    assert r.status == "done" and kinds(r) == []
    waits = [s for s in r.steps(1, r.total_steps) if s["op"].startswith("mbarrier.test_wait")]
    assert [w["operands"]["barrier"] for w in waits] == ["barB", "barA"]
    assert [w["events"][0]["kind"] for w in waits] == ["wait_returned", "wait_pending"]


def test_a_wait_with_another_barriers_token_is_token_mismatch():
    r = run(source("tokens"), bugs=["swapped"])
    assert r.status == "undefined_behavior"
    last = r.diagnostics[-1]
    assert last["rule"] == "token_mismatch" and last["step"] == 4
    assert "a token of barB" in last["message"] and "barA" in last["message"]


def test_no_complete_that_completes_the_phase_is_undefined():
    r = run(source("tokens"), bugs=["no_complete"])
    assert r.status == "undefined_behavior"
    assert r.diagnostics[-1]["rule"] == "no_complete" and r.diagnostics[-1]["step"] == 2


def test_no_complete_that_leaves_arrivals_pending_is_an_arrive():
    text = source("tokens").replace("mbarrier.arrive.shared::cta.b64 ta, [barA];",
                                    "mbarrier.arrive.noComplete.shared::cta.b64 ta, [barA], 1;")
    r = run(text)
    assert r.status == "done" and kinds(r) == []


COMPLETE_TX = """
barrier bar = 1;
agent thread {
    mbarrier.arrive.expect_tx.shared::cta.b64 _, [bar], 2048;
    mbarrier.complete_tx.shared::cta.b64 [bar], 1024;
    mbarrier.try_wait.parity.shared::cta.b64 _, [bar], 0;
}
"""


def test_a_threads_complete_tx_counts_as_bytes_brought():
    r = run(COMPLETE_TX)
    assert r.status == "deadlock"
    found = {d["kind"]: d for d in r.diagnostics}
    assert set(found) == {"deadlock", "tx_mismatch"}
    assert "brought 1024" in found["tx_mismatch"]["message"]


def test_a_threads_complete_tx_beyond_the_announcement_is_tx_mismatch():
    r = run(COMPLETE_TX.replace("1024;", "3072;"))
    assert "tx_mismatch" in kinds(r)
