"""Small looping programs drawn from a seeded generator: the reduced search, the unreduced one and
the brute force of tests/check/helpers.py agree on whether a livelock is reachable and on every
other kind, and every livelock lasso the checker answers replays and closes. (The oracle tests
cover pipelines at large; these are about cycles: polls, `while (1)`, symmetric agents.)"""

from __future__ import annotations

import random

import pytest

from app.check.engine import Explorer, Limits

from . import programs as p
from .helpers import fair_cycle_reachable
from .test_livelock import assert_lasso, check, livelock_of

BOUND = Limits(max_states=50_000, timeout_s=3600)


def _line(rng: random.Random, barriers: int, forever: bool) -> str:
    """One line; in a `while (1)` body only lines that cannot make the state grow (no arrive:
    a phase count that grows has no cycle, and the search would not end)."""
    b = f"b{rng.randrange(barriers)}"
    parity = rng.randrange(2)
    polls = [f"mbarrier.try_wait.parity.shared::cta.b64 w, [{b}], {parity};",
             f"mbarrier.test_wait.parity.shared::cta.b64 ok, [{b}], {parity};", "x = x;"]
    if forever:
        return rng.choice(polls)
    return rng.choice([*polls, f"mbarrier.arrive.shared::cta.b64 _, [{b}];",
                       f"ok = 0; while (!ok) {{ mbarrier.test_wait.parity.shared::cta.b64 ok, "
                       f"[{b}], {parity}; }}",
                       f"if (!ok) {{ mbarrier.arrive.shared::cta.b64 _, [{b}]; }}"])


def program(seed: int) -> str:
    rng = random.Random(seed)
    barriers = rng.randrange(1, 3)
    lines = [f"barrier b{i} = {rng.randrange(1, 3)};" for i in range(barriers)]
    for a in range(rng.randrange(1, 4)):
        copies = rng.choice(["", "", "[2]"])
        forever = rng.random() < 0.25
        body = [_line(rng, barriers, forever) for _ in range(rng.randrange(1, 4))]
        if forever:
            body = ["while (1) { " + " ".join(body) + " }"]
        lines.append(f"agent a{a}{copies} {{\n    int ok = 0;\n    int w = 0;\n    int x = 0;\n"
                     + "".join(f"    {line}\n" for line in body) + "}")
    return "\n".join(lines) + "\n"


SEEDS = list(range(40))


@pytest.mark.parametrize("seed", SEEDS)
def test_generated_loops_agree(seed):
    source = program(seed)
    cfg = p.config(source)
    reduced = Explorer(cfg).explore(BOUND)
    plain = Explorer(cfg, reduce=False).explore(BOUND)
    assert reduced.complete and plain.complete, source
    assert set(reduced.found) == set(plain.found), source
    for kind in reduced.found.keys() - {"livelock"}:
        assert reduced.found[kind].steps == plain.found[kind].steps, (kind, source)
    assert ("livelock" in reduced.found) == fair_cycle_reachable(cfg), source
    if "livelock" in reduced.found:
        assert_lasso(source, livelock_of(check(source)))


def test_the_generator_draws_both_answers():
    answers = {fair_cycle_reachable(p.config(program(seed))) for seed in SEEDS}
    assert answers == {True, False}
