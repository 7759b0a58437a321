"""Every in-flight copy has a unique name that a manual schedule can use (issue 17, item 2):
today's names where they are unique, a suffix where two would collide."""

import pytest

from app.sim.machine import MoveError

from .semantics_helpers import kinds, reachable, run, source

ISSUE = ["producer"] * 4


def test_two_copies_of_one_tile_get_distinct_names():
    r = run(source("two_copies"), ISSUE)
    names = r.machine.moves()
    assert "tma:load:t0" in names and "tma:load:t0#2" in names


@pytest.mark.parametrize("first", ["tma:load:t0", "tma:load:t0#2"])
def test_a_manual_schedule_lands_either_copy_first(first):
    second = ({"tma:load:t0", "tma:load:t0#2"} - {first}).pop()
    r = run(source("two_copies"), ISSUE + [first])
    landed = r.steps(5, 5)[0]
    assert landed["operands"]["op"] == first.removeprefix("tma:")
    expected_bar = "barA" if first == "tma:load:t0" else "barB"
    assert landed["operands"]["barrier"] == expected_bar
    r = run(source("two_copies"), ISSUE + [first, second, "consumer", "consumer"])
    assert r.status == "done" and kinds(r) == []


def test_a_name_stays_with_its_copy_and_frees_when_it_lands():
    r = run(source("two_copies"), ISSUE + ["tma:load:t0"])
    assert [n for n in r.machine.moves() if n.startswith("tma:")] == [
        "tma:load:t0#2", "tma:load:t0#2:hold"]


def test_an_unknown_copy_name_is_refused_with_the_names_in_flight():
    with pytest.raises(MoveError, match="tma:load:t0#2"):
        run(source("two_copies"), ISSUE + ["tma:load:t0#3"])


def test_two_copies_of_one_tile_check_safe():
    verdict, found = reachable(source("two_copies"))
    assert verdict == "safe" and found == set()
