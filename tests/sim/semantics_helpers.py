"""Small helpers for the tests of the engine's rules on pipelines written for them
(tests/sim/programs/*.pipe): compile a text, run it under a schedule, check every schedule."""

from __future__ import annotations

from pathlib import Path

from app.check.engine import Explorer, Limits
from app.scenarios import from_source
from app.sim.schedule import Schedule
from app.sim.trace import Run

PROGRAMS = Path(__file__).parent / "programs"


def source(name: str) -> str:
    return (PROGRAMS / f"{name}.pipe").read_text()


def config(text: str, bugs=(), **params):
    return from_source(text).resolve(params, list(bugs))


def run(text: str, moves=None, bugs=(), **params) -> Run:
    schedule = (Schedule("manual", moves=tuple(moves)) if moves is not None
                else Schedule("round_robin"))
    return Run.complete(config(text, bugs, **params), schedule)


def kinds(run_: Run) -> list[str]:
    return [d["kind"] for d in run_.diagnostics]


def reachable(text: str, bugs=(), max_states: int = 200_000, **params) -> tuple[str, set]:
    """The verdict and the set of reachable diagnostic kinds over every schedule."""
    out = Explorer(config(text, bugs, **params)).explore(Limits(max_states, 600.0))
    return out.verdict, set(out.found)
