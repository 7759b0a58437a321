"""The mbarrier family's rows of the instruction table (app/sim/isa.py), kept beside
families/sync.py, which registers them (`Family.forms`); no `FAMILY` of its own."""

from __future__ import annotations

from ..isa import Form, Gap, Slot


def isa_forms() -> tuple:
    """This family's rows of the instruction table (app/sim/isa.py), from the syntax blocks of
    PTX 9.1 section 9.7.13.15 (mbarrier)."""
    b64 = Slot("type", ("b64",), default="b64", required=True, may_omit=True)
    own = Slot("space", ("shared", "shared::cta"),
               note="left out: generic addressing of the barrier in the executing CTA")
    any_space = Slot("space", ("shared", "shared::cta", "shared::cluster"),
                     note="`.shared::cluster` with `[mapa(bar, cta)]`: a barrier in another CTA")
    scope = Slot("scope", ("cta", "cluster"), default="cta")
    release = Slot("sem", ("release", "relaxed"), default="release")
    acquire = Slot("sem", ("acquire", "relaxed"), default="acquire")
    relaxed = Slot("sem", ("relaxed",), note="left out, with `.scope` left out: no `.sem`")
    tx_scope = Slot("scope", ("cta", "cluster"))
    pair = (("sem", "scope"),)
    local = ("PTX 9.7.13.15.8: on a barrier in another CTA (`.shared::cluster`) only arrive, "
             "expect-tx and complete-tx are supported")
    no_cluster = (("shared::cluster", "a wait, init or inval needs a barrier in the executing "
                                      "CTA (`.shared::cta`)", local),)
    phase_type = ("`.phase_type` is a PTX ISA 9.3 qualifier of `mbarrier.try_wait` (section "
                  "9.7.14.16.19); this table follows PTX 9.1, which has none")
    try_refuse = (*no_cluster,
                  ("phase_type::conditional", "`.phase_type::conditional` is not modelled",
                   phase_type),
                  ("phase_type::primary", "`.phase_type::primary` is not modelled", phase_type))
    arrive_slots = (release, scope, any_space, b64)
    wait_slots = (acquire, scope, own, b64)
    tx_slots = (relaxed, tx_scope, any_space, b64)
    no_complete = (Slot("sem", ("release",), default="release"),
                   Slot("scope", ("cta",), default="cta"), own, b64)
    no_complete_remote = ("a `.noComplete` arrive returns a state, so its barrier is in the "
                          "executing CTA (PTX 9.7.13.15.13: `.shared{::cta}` only)")
    no_complete_cluster = (("shared::cluster", "`.noComplete` takes no `.shared::cluster`",
                            no_complete_remote),)
    counts = ("`count` arrivals (default 1); `state` gets the phase it arrived in; an arrive on "
              "a stage's release barrier releases the agent's hold on that stage")
    return (
        Form("mbarrier.init", "init", "[barrier], count", "9.7.13.15.9",
             "count 1..2^20-1: phase 0, pending = expected = count, tx 0",
             (own, b64), refuse=no_cluster, remote=local),
        Form("mbarrier.inval", "inval", "[barrier]", "9.7.13.15.10",
             "the barrier is no longer valid", (own, b64), refuse=no_cluster, remote=local),
        Form("mbarrier.arrive", "arrive", "{state,} [barrier] {, count}", "9.7.13.15.13",
             counts, arrive_slots, together=pair, remote_sink=True),
        Form("mbarrier.arrive.noComplete", "arrive", "{state,} [barrier], count",
             "9.7.13.15.13", "the same; completing the phase with it is undefined behaviour",
             no_complete, together=pair, refuse=no_complete_cluster,
             remote=no_complete_remote, flags=("noComplete",)),
        Form("mbarrier.arrive.expect_tx", "arrive_expect_tx", "{state,} [barrier], txCount",
             "9.7.13.15.13",
             "`over_arrival` if no arrival is pending; else expect-tx(txCount), then arrive",
             arrive_slots, together=pair, remote_sink=True),
        Form("mbarrier.arrive_drop", "arrive_drop", "{state,} [barrier] {, count}",
             "9.7.13.15.14", "expected -= count for this and later phases, then arrive",
             arrive_slots, together=pair, remote_sink=True),
        Form("mbarrier.arrive_drop.noComplete", "arrive_drop", "{state,} [barrier], count",
             "9.7.13.15.14", "the same; completing the phase with it is undefined behaviour",
             no_complete, together=pair, refuse=no_complete_cluster,
             remote=no_complete_remote, flags=("noComplete",)),
        Form("mbarrier.expect_tx", "expect_tx", "[barrier], txCount", "9.7.13.15.11",
             "tx += txCount, no arrival (it may complete the phase)", tx_slots, together=pair),
        Form("mbarrier.complete_tx", "complete_tx", "[barrier], txCount", "9.7.13.15.12",
             "tx -= txCount, from a thread", tx_slots, together=pair),
        Form("mbarrier.test_wait", "wait_token", "{waitComplete,} [barrier], state",
             "9.7.13.15.16", "never blocks; `waitComplete` = 1 once the phase of the state "
             "token completed; a token two or more phases old is `stale_token`",
             wait_slots, together=pair, refuse=no_cluster, remote=local),
        Form("mbarrier.test_wait.parity", "wait_parity",
             "{waitComplete,} [barrier], phaseParity", "9.7.13.15.16",
             "never blocks; `waitComplete` = 1 if the phase with that parity completed",
             wait_slots, together=pair, refuse=no_cluster, remote=local),
        Form("mbarrier.try_wait", "wait_token",
             "{waitComplete,} [barrier], state {, suspendTimeHint}", "9.7.13.15.16",
             "blocks until the phase of the state token completes; where the program branches "
             "on `waitComplete`, it may also return false before (PTX's time limit)",
             wait_slots, together=pair, refuse=try_refuse, remote=local),
        Form("mbarrier.try_wait.parity", "wait_parity",
             "{waitComplete,} [barrier], phaseParity {, suspendTimeHint}", "9.7.13.15.16",
             "blocks until the barrier's parity differs from `phaseParity`; where the program "
             "branches on `waitComplete`, it may also return false before (PTX's time limit)",
             wait_slots, together=pair, refuse=try_refuse, remote=local),
        Gap("mbarrier.arrive_drop.expect_tx", "9.7.13.15.14",
            "`mbarrier.arrive_drop.expect_tx` is not modelled yet",
            "the engine models `mbarrier.expect_tx` and `mbarrier.arrive_drop` as two lines"),
        Gap("mbarrier.pending_count", "9.7.13.15.17",
            "`mbarrier.pending_count` is not modelled yet in a pipeline",
            "POST /api/v1/mbarrier/run has a `pending_count` op"),
    )
