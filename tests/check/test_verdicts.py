"""Verdicts: correct pipelines are safe under every schedule; each bug toggle is unsafe where it
can bite, with the diagnostic kinds it leads to, and safe where it cannot."""

from __future__ import annotations

import pytest

from .helpers import explore, lengths

CORRECT = [
    *[("single_barrier", {"tiles": t}) for t in range(1, 7)],
    *[("double_buffer_tma", {"stages": s, "tiles": t, "consumers": c})
      for s in (1, 2, 3) for t in range(1, 7) for c in (1, 2)],
    *[("kloop_tma_mma", {"stages": s, "tiles": t}) for s in (1, 2, 3) for t in range(1, 7)],
    *[("proxy_fence_store", {"stages": s, "tiles": t}) for s in (1, 2, 3) for t in range(1, 7)],
    *[("cluster_multicast", {"stages": 1, "tiles": t}) for t in (1, 2, 3)],
    ("cluster_multicast", {"stages": 2, "tiles": 1}),
]


@pytest.mark.parametrize(("scenario", "params"), CORRECT,
                         ids=[f"{s}-{'-'.join(map(str, p.values()))}" for s, p in CORRECT])
def test_correct_configurations_are_safe(scenario, params):
    _, out = explore(scenario, **params)
    assert out.verdict == "safe", lengths(out)
    assert out.complete and not out.found and out.stopped_by is None


SAFE_BUGS = [
    # forget_phase_toggle never reuses a stage when tiles <= stages: every wait is a first use.
    ("single_barrier", {"tiles": 1}, "forget_phase_toggle"),
    ("double_buffer_tma", {"stages": 2, "tiles": 2, "consumers": 2}, "forget_phase_toggle"),
    ("double_buffer_tma", {"stages": 3, "tiles": 3, "consumers": 1}, "forget_phase_toggle"),
    ("kloop_tma_mma", {"stages": 2, "tiles": 2}, "forget_phase_toggle"),
    ("double_buffer_tma", {"stages": 2, "tiles": 2, "consumers": 1},
     "forget_producer_phase_toggle"),
    ("double_buffer_tma", {"stages": 2, "tiles": 2, "consumers": 2}, "consumer_skips_release"),
    ("double_buffer_tma", {"stages": 2, "tiles": 2, "consumers": 1}, "producer_skips_empty_wait"),
    ("kloop_tma_mma", {"stages": 2, "tiles": 2}, "producer_skips_empty_wait"),
    # One consumer: an empty_barrier count of 1 is the right count.
    ("double_buffer_tma", {"stages": 1, "tiles": 4, "consumers": 1}, "wrong_arrival_count"),
    ("double_buffer_tma", {"stages": 2, "tiles": 4, "consumers": 1}, "wrong_arrival_count"),
    # One tile never reuses a stage: the missing remote arrive has nothing to protect.
    ("cluster_multicast", {"stages": 1, "tiles": 1}, "release_local_only"),
]


@pytest.mark.parametrize(("scenario", "params", "bug"), SAFE_BUGS)
def test_bug_is_safe_where_it_cannot_bite(scenario, params, bug):
    _, out = explore(scenario, [bug], **params)
    assert out.verdict == "safe", lengths(out)


UNSAFE_BUGS = [
    ("single_barrier", {"tiles": 2}, "forget_phase_toggle",
     {"stale_wait": 12, "stale_read": 13, "partial_read": 14, "deadlock": 15, "ordering_race": 17}),
    # A short announcement races: an early completion (partial_read) or a count that steps over
    # zero (deadlock), as on the H200; tx_mismatch names the cause as soon as the copy is issued.
    ("single_barrier", {"tiles": 1}, "expect_tx_short",
     {"tx_mismatch": 3, "deadlock": 7, "partial_read": 8, "ordering_race": 9}),
    ("single_barrier", {"tiles": 2}, "expect_tx_long", {"tx_mismatch": 7, "deadlock": 7}),
    ("double_buffer_tma", {"stages": 2, "tiles": 3, "consumers": 1}, "forget_phase_toggle",
     {"stale_wait": 38, "stale_read": 39, "ordering_race": 44, "partial_read": 44, "deadlock": 46,
      "overwrite": 45, "reuse_before_wait": 47}),
    ("double_buffer_tma", {"stages": 1, "tiles": 2, "consumers": 1},
     "forget_producer_phase_toggle",
     {"stale_wait": 5, "over_arrival": 6, "reuse_before_wait": 10, "ordering_race": 13,
      "overwrite": 13, "partial_read": 14, "deadlock": 16, "stale_read": 17}),
    ("double_buffer_tma", {"stages": 1, "tiles": 1, "consumers": 1}, "expect_tx_short",
     {"tx_mismatch": 3, "deadlock": 8, "partial_read": 8, "ordering_race": 9, "overwrite": 10}),
    ("double_buffer_tma", {"stages": 2, "tiles": 2, "consumers": 1}, "expect_tx_long",
     {"tx_mismatch": 16, "deadlock": 16}),
    ("double_buffer_tma", {"stages": 1, "tiles": 2, "consumers": 2}, "consumer_skips_release",
     {"deadlock": 28}),
    ("double_buffer_tma", {"stages": 1, "tiles": 2, "consumers": 1}, "producer_skips_empty_wait",
     {"over_arrival": 4, "reuse_before_wait": 8, "ordering_race": 11, "overwrite": 11,
      "partial_read": 12, "deadlock": 14, "stale_read": 15}),
    ("double_buffer_tma", {"stages": 1, "tiles": 2, "consumers": 2}, "wrong_arrival_count",
     {"ordering_race": 23, "overwrite": 23, "partial_read": 24, "reuse_before_wait": 27,
      "stale_read": 27, "deadlock": 30}),
    ("kloop_tma_mma", {"stages": 1, "tiles": 2}, "forget_phase_toggle",
     {"stale_wait": 12, "stale_read": 16, "reuse_before_wait": 18, "overwrite": 20,
      "partial_read": 21, "deadlock": 22, "ordering_race": 24}),
    ("kloop_tma_mma", {"stages": 1, "tiles": 2}, "forget_producer_phase_toggle",
     {"stale_wait": 5, "over_arrival": 6, "reuse_before_wait": 10, "overwrite": 13, "deadlock": 14,
      "ordering_race": 14, "partial_read": 15, "stale_read": 18}),
    ("kloop_tma_mma", {"stages": 1, "tiles": 1}, "expect_tx_short",
     {"tx_mismatch": 3, "deadlock": 8, "partial_read": 9, "ordering_race": 10}),
    ("kloop_tma_mma", {"stages": 1, "tiles": 1}, "expect_tx_long",
     {"tx_mismatch": 8, "deadlock": 8}),
    ("kloop_tma_mma", {"stages": 1, "tiles": 1}, "missing_mma_commit", {"deadlock": 12}),
    ("kloop_tma_mma", {"stages": 1, "tiles": 2}, "producer_skips_empty_wait",
     {"over_arrival": 4, "reuse_before_wait": 8, "overwrite": 11, "ordering_race": 12,
      "partial_read": 13, "deadlock": 14, "stale_read": 16}),
    ("kloop_tma_mma", {"stages": 1, "tiles": 1}, "missing_tcgen05_fence",
     {"tcgen05_ld_race": 17}),
    ("kloop_tma_mma", {"stages": 1, "tiles": 1}, "missing_tcgen05_wait",
     {"tcgen05_ld_race": 19}),
    ("proxy_fence_store", {"stages": 2, "tiles": 3}, "missing_proxy_fence",
     {"proxy_fence_missing": 4}),
    ("cluster_multicast", {"stages": 1, "tiles": 2}, "release_local_only",
     {"tx_mismatch": 18, "ordering_race": 24, "overwrite": 24, "partial_read": 24,
      "stale_read": 24, "deadlock": 29}),
    ("cluster_multicast", {"stages": 1, "tiles": 2}, "no_producer_tail",
     {"remote_after_exit": 50}),
    ("cluster_multicast", {"stages": 1, "tiles": 1}, "expect_tx_one_cta",
     {"partial_read": 4, "tx_mismatch": 6, "ordering_race": 12, "deadlock": 21,
      "remote_after_exit": 23}),
]


@pytest.mark.parametrize(("scenario", "params", "bug", "expected"), UNSAFE_BUGS)
def test_bug_is_unsafe_where_it_bites(scenario, params, bug, expected):
    _, out = explore(scenario, [bug], **params)
    assert out.verdict == "unsafe"
    assert lengths(out) == expected


def test_every_toggle_is_covered_both_ways():
    from app.scenarios import catalogue

    unsafe = {(s, b) for s, _, b, _ in UNSAFE_BUGS}
    for scenario in catalogue().values():
        if scenario.group == "real_bugs":  # tests/lessons/test_real_bugs.py
            continue
        for bug in scenario.bugs:
            assert (scenario.id, bug) in unsafe, (scenario.id, bug)
    assert {b for _, _, b in SAFE_BUGS} >= {"forget_phase_toggle", "wrong_arrival_count"}
