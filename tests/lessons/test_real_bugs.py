"""The library of real upstream bugs (app/scenarios, group `real_bugs`): each lesson's correct
version is safe under every schedule, its toggle reaches the symptom the upstream report
describes (a hang is `deadlock`; wrong data is `stale_read` / `partial_read`; an overwrite is
`overwrite`; a missing proxy fence is `proxy_fence_missing`), and the toggle is safe where the
report says the bug cannot bite. Searches are bounded by states, never by the clock."""

from __future__ import annotations

import json

import pytest

from app.check.engine import Limits
from app.scenarios import HERE, _entry, catalogue
from app.sim.schedule import Schedule
from app.sim.trace import Run
from app.web.learning import lesson
from tests.check.helpers import explore, lengths

DEFAULT_LIMITS = Limits(max_states=1_000_000, timeout_s=3600.0)
"""The checker's default state budget; no clock (a busy machine must not fail a test)."""

REAL_BUGS = {s.id: s for s in catalogue().values() if s.group == "real_bugs"}

# (lesson, params where the toggle bites (the defaults when {}), toggle, each reachable kind with
#  its shortest schedule, the kinds the upstream report describes)
BITES = [
    ("tilelang_2566_single_iteration_hang", {}, "bulk_1d_drops_arrive", {"deadlock": 6},
     {"deadlock"}),
    ("mirage_705_box_bytes", {}, "unclamped_box",
     {"tx_mismatch": 3, "deadlock": 6, "partial_read": 6, "ordering_race": 7, "stale_read": 14,
      "overwrite": 15}, {"deadlock"}),
    ("tilelang_3087_single_slot_parity", {}, "ring_parity",
     {"stale_wait": 22, "partial_read": 26, "deadlock": 27, "stale_read": 27,
      "reuse_before_wait": 33}, {"stale_wait", "partial_read"}),
    ("tilelang_2674_persistent_phase", {}, "phase_reset_per_tile",
     {"stale_wait": 11, "over_arrival": 12, "reuse_before_wait": 14, "ordering_race": 18,
      "overwrite": 18, "partial_read": 19, "stale_read": 20, "deadlock": 27},
     {"stale_wait", "stale_read"}),
    ("flashkda_24_empty_sequence_fence", {}, "zero_init_unfenced", {"proxy_fence_missing": 3},
     {"proxy_fence_missing"}),
    ("flashkda_24_empty_sequence_fence", {"tiles": 2}, "fp32_state_unfenced",
     {"proxy_fence_missing": 18}, {"proxy_fence_missing"}),
    ("tilelang_2927_copy_cluster_parity", {}, "loop_parity",
     {"stale_wait": 11, "partial_read": 12, "ordering_race": 14, "remote_after_exit": 20,
      "deadlock": 22}, {"stale_wait", "partial_read"}),
    ("deepgemm_415_multicast_straddle", {}, "straddles_groups",
     {"tx_mismatch": 16, "deadlock": 16}, {"deadlock"}),
]

# Where the report says the bug hides: the toggle is safe there.
HIDES = [
    # tilelang#2566: two or more iterations take the tensor-map lowering, which arrives.
    ("tilelang_2566_single_iteration_hang", {"tiles": 3}, "bulk_1d_drops_arrive"),
    # tilelang#2674: correct when the K trip count is a multiple of 2 x num_stages.
    ("tilelang_2674_persistent_phase", {"stages": 2, "k_blocks": 4}, "phase_reset_per_tile"),
    ("tilelang_2674_persistent_phase", {"stages": 1, "k_blocks": 2}, "phase_reset_per_tile"),
    # ... or when one wave covers every tile.
    ("tilelang_2674_persistent_phase", {"tiles": 1}, "phase_reset_per_tile"),
    # FlashKDA#24: a sequence of one chunk or more is covered by the loop's fence.
    ("flashkda_24_empty_sequence_fence", {"tiles": 1}, "zero_init_unfenced"),
    ("flashkda_24_empty_sequence_fence", {"tiles": 2}, "zero_init_unfenced"),
    # tilelang#2927: s & 1 is 0 at s = 0, right for bar[0]: one iteration cannot go wrong.
    ("tilelang_2927_copy_cluster_parity", {"tiles": 1}, "loop_parity"),
]

# Correct versions, at their defaults and a few other small configurations.
CORRECT = [
    *[(sid, {}) for sid in REAL_BUGS],
    ("tilelang_2566_single_iteration_hang", {"tiles": 3}),
    ("tilelang_2566_single_iteration_hang", {"stages": 1, "tiles": 2}),
    ("mirage_705_box_bytes", {"stages": 2, "tiles": 4}),
    ("tilelang_3087_single_slot_parity", {"stages": 2, "tiles": 5}),
    ("tilelang_2674_persistent_phase", {"stages": 2, "k_blocks": 3}),
    ("tilelang_2674_persistent_phase", {"stages": 3, "k_blocks": 2}),
    ("flashkda_24_empty_sequence_fence", {"tiles": 2}),
]


def _id(case) -> str:
    return "-".join([case[0], *(f"{k}{v}" for k, v in case[1].items()), *case[2:3]])


@pytest.mark.parametrize(("scenario", "params"), CORRECT, ids=[_id(c) for c in CORRECT])
def test_the_correct_version_is_safe_under_every_schedule(scenario, params):
    _, out = explore(scenario, limits=DEFAULT_LIMITS, **params)
    assert out.verdict == "safe", lengths(out)
    assert out.complete and out.stopped_by is None


@pytest.mark.parametrize(("scenario", "params", "bug", "expected", "reported"), BITES,
                         ids=[_id(c) for c in BITES])
def test_the_toggle_reaches_the_reported_symptom(scenario, params, bug, expected, reported):
    _, out = explore(scenario, [bug], limits=DEFAULT_LIMITS, **params)
    assert out.verdict == "unsafe" and out.complete
    assert lengths(out) == expected
    assert reported <= set(expected)


@pytest.mark.parametrize(("scenario", "params", "bug"), HIDES, ids=[_id(c) for c in HIDES])
def test_the_toggle_is_safe_where_the_report_says_it_hides(scenario, params, bug):
    _, out = explore(scenario, [bug], limits=DEFAULT_LIMITS, **params)
    assert out.verdict == "safe", lengths(out)


def test_every_real_bug_toggle_is_covered():
    covered = {(s, b) for s, _, b, _, _ in BITES}
    assert {(sid, bug) for sid, s in REAL_BUGS.items() for bug in s.bugs} == covered
    assert len(REAL_BUGS) >= 5


@pytest.mark.parametrize("scenario_id", sorted(REAL_BUGS))
def test_the_entry_cites_its_report_in_one_line(scenario_id):
    scenario = REAL_BUGS[scenario_id]
    data = scenario.as_dict()
    assert data["group"] == "real_bugs"
    owner_repo_number = data["source_url"].removeprefix("https://github.com/")
    assert owner_repo_number.split("/")[2] in ("issues", "pull")
    assert "\n" not in data["summary"] and 40 <= len(data["summary"]) <= 240
    # the pipeline's leading comment names the same report
    repo, number = owner_repo_number.split("/")[1], owner_repo_number.split("/")[3]
    assert f"{repo}#{number}" in scenario.source.splitlines()[0]
    assert scenario.bugs and all(t["description"] for t in data["toggles"])


@pytest.mark.parametrize("scenario_id", sorted(REAL_BUGS))
def test_the_guided_tour_covers_the_correct_run_and_each_toggle(scenario_id):
    """A tour per run (the correct one and each toggle's), pinned to steps of that run on its
    defaults under round robin, which is the run the browser shows them on; a bug tour's last
    note is at or past the step where the run first goes wrong."""
    scenario = REAL_BUGS[scenario_id]
    callouts = lesson(scenario_id)["callouts"]
    assert all(c["text"].strip() for c in callouts)
    for bugs in [(), *[(b,) for b in scenario.bugs]]:
        steps = [c["step"] for c in callouts if tuple(sorted(c.get("bugs", []))) == bugs]
        assert steps, f"no tour for {bugs or 'the correct run'}"
        cfg = scenario.resolve({}, list(bugs))
        run = Run.complete(cfg, Schedule("round_robin"), scenario.describe(cfg))
        assert max(steps) <= run.total_steps
        assert len(steps) == len(set(steps)), "one note per step"
        if bugs and run.diagnostics:
            assert max(steps) >= min(d["step"] for d in run.diagnostics)
        elif bugs:  # round robin does not hit this race: the tour sends the reader to the checker
            last = max((c for c in callouts if tuple(sorted(c.get("bugs", []))) == bugs),
                       key=lambda c: c["step"])
            assert "checker" in last["text"]
        else:
            assert run.status == "done" and not run.diagnostics


def _write(tmp_path, **fields):
    data = {"id": "x", "title": "t", "summary": "s", "lesson": "l", "source": "x.pipe", **fields}
    path = tmp_path / "x.json"
    path.write_text(json.dumps(data))
    return path


def test_a_malformed_catalogue_entry_is_refused_with_its_file_and_field(tmp_path, monkeypatch):
    (tmp_path / "x.pipe").write_text((HERE / "single_barrier.pipe").read_text())
    monkeypatch.setattr("app.scenarios.HERE", tmp_path)
    with pytest.raises(ValueError, match=r"x\.json: a real bug names its upstream report"):
        _entry(_write(tmp_path, group="real_bugs", summary="one line"))
    with pytest.raises(ValueError, match="source_url https://github.com/OWNER/REPO"):
        _entry(_write(tmp_path, group="real_bugs", source_url="http://example.com/1"))
    with pytest.raises(ValueError, match="summary is one line"):
        _entry(_write(tmp_path, group="real_bugs", summary="two\nlines",
                      source_url="https://github.com/a/b/issues/1"))
    with pytest.raises(ValueError, match="group 'bugs' is not one of"):
        _entry(_write(tmp_path, group="bugs"))
    with pytest.raises(ValueError, match="source_url belongs to the real_bugs group"):
        _entry(_write(tmp_path, source_url="https://github.com/a/b/issues/1"))
    ok = _entry(_write(tmp_path, group="real_bugs", summary="a report in one line",
                       source_url="https://github.com/a/b/pull/7"))
    assert (ok.group, ok.source_url) == ("real_bugs", "https://github.com/a/b/pull/7")


def test_the_catalogue_lists_the_scenarios_first_then_the_real_bugs():
    groups = [s.group for s in catalogue().values()]
    assert groups == sorted(groups, key=("scenarios", "real_bugs").index)
    assert groups[:5] == ["scenarios"] * 5
