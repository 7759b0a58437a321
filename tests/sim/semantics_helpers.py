"""Small helpers for the tests of the engine's rules on pipelines written for them
(tests/sim/programs/*.pipe, and app/capture/pipelines/families/*.pipe for the families that
are also captured on the H200): compile a text, run it under a schedule, check every schedule."""

from __future__ import annotations

from pathlib import Path

from app.check.engine import Explorer, Limits
from app.scenarios import from_source
from app.sim.schedule import Schedule
from app.sim.trace import Run

PROGRAMS = Path(__file__).parent / "programs"
CAPTURED_PROGRAMS = Path(__file__).resolve().parents[2] / "app/capture/pipelines/families"


def source(name: str) -> str:
    """A test program's text: tests/sim/programs first, then the captured families' folder."""
    path = PROGRAMS / f"{name}.pipe"
    return (path if path.exists() else CAPTURED_PROGRAMS / f"{name}.pipe").read_text()


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
