"""One check, from user input to the answer the API and the CLI give: validate the request, explore
every schedule, and turn each shortest counterexample into a normal trace document (trace v1)
built by `Run.append`, so the UI and any client replay it like any other trace.

The answer: `{"verdict": "safe" | "unsafe" | "inconclusive", "violations": [{"kind", "steps",
"trace", ...}], "states_explored", "elapsed_s", ...}` (docs/checker.md). `inconclusive` means a
limit stopped the search; the violations found so far are still listed.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import replace
from threading import Event

from app.core.config import settings
from app.core.pool import lender as pool_lender
from app.scenarios import ParamError, Scenario
from app.scenarios import get as get_scenario
from app.sim.config import PipelineConfig
from app.sim.schedule import Schedule
from app.sim.trace import Run

from .budget import CloseGuard, Stop
from .engine import Exploration, Explorer, Limits, Progress, release_memory
from .graph import LIVELOCK
from .parallel import Lent

MAX_STATES = 2_000_000
MAX_TIMEOUT_S = 60.0
DEFAULT_MAX_STATES = 1_000_000
DEFAULT_TIMEOUT_S = 20.0
MAX_MEMORY = settings.check_max_memory_mb << 20
"""Bytes one check may keep in stored states (an estimate the search maintains as it goes):
`MBI_CHECK_MAX_MEMORY_MB`."""

STOP_REASONS = {
    "max_states": "the state limit",
    "timeout": "the time limit",
    "memory": "the memory limit",
    "cancelled": "cancellation",
    "first_violation": "the first violation (stop_at_first)",
    "runaway": "a runaway: an agent's own moves that never end",
}
POST_SEARCH_S = 0.6
"""Time the counterexamples of a search a limit stopped may still take to rebuild."""


class InternalError(RuntimeError):
    """An internal consistency check failed (a counterexample that does not replay, a local
    move that raised a diagnostic): a bug of the checker or the engine, not of the pipeline.
    Its message names the configuration, so a report can reproduce it; the CLI exits 3 and the
    API answers a JSON 500 with it."""


def validate_limits(max_states, timeout_s, max_states_cap: int = MAX_STATES,
                    timeout_cap: float = MAX_TIMEOUT_S) -> tuple[int, float]:
    """The limits as numbers within their caps; `ParamError` names the field otherwise."""
    if max_states is None:
        max_states = min(DEFAULT_MAX_STATES, max_states_cap)
    if isinstance(max_states, bool) or not isinstance(max_states, int):
        raise ParamError("max_states", "max_states must be an integer")
    if not 1 <= max_states <= max_states_cap:
        raise ParamError("max_states", f"max_states must be in 1..{max_states_cap:,}; "
                                       f"got {max_states:,}")
    if timeout_s is None:
        timeout_s = min(DEFAULT_TIMEOUT_S, timeout_cap)
    if isinstance(timeout_s, bool) or not isinstance(timeout_s, int | float):
        raise ParamError("timeout_s", "timeout_s must be a number of seconds")
    if not 0 < timeout_s <= timeout_cap:
        raise ParamError("timeout_s", f"timeout_s must be more than 0 and at most {timeout_cap:g}; "
                                      f"got {timeout_s:g}")
    return max_states, float(timeout_s)


def scenario_for(scenario_id: str) -> Scenario:
    try:
        return get_scenario(scenario_id)
    except KeyError:
        from app.scenarios import catalogue

        raise ParamError("scenario", f"no scenario {scenario_id[:80]!r}; scenarios: "
                                     f"{', '.join(catalogue())}") from None


def check_config(scenario: Scenario, cfg: PipelineConfig, limits: Limits,
                 progress: Callable[[Progress], None] | None = None,
                 cancel: Event | None = None, reduce: bool = True, por: bool = True,
                 lent: Lent | None = None, helpers: int = 0) -> dict:
    """Explore `cfg` and build the answer, traces included; `InternalError` if a consistency
    check fails on the way. `lent`, `helpers`: slots the search may borrow for helper
    processes, and how many at most (app/check/parallel.py)."""
    start = time.perf_counter()
    describe = scenario.describe(cfg)
    try:
        explorer = Explorer(cfg, reduce, por)
        out = explorer.explore(limits, progress, cancel, lent, helpers)
        if explorer.guard is not None:  # the rebuild's closures get a little time of their own
            explorer.guard = CloseGuard(explorer.guard.budget.extended(POST_SEARCH_S),
                                        explorer.guard.max_moves, explorer.cyclic)
        violations = []
        for kind in sorted(out.found, key=lambda k: (out.found[k].steps, k)):
            try:
                violations.append(violation(explorer, out, kind, describe))
            except Stop:  # out of time for this one's rebuild: the others still come
                continue
    except Exception as err:
        raise InternalError(f"internal error while checking {configuration(describe)}: "
                            f"{type(err).__name__}: {err}") from err
    return {
        "verdict": out.verdict,
        "violations": violations,
        "states_explored": out.states,
        "elapsed_s": round(time.perf_counter() - start, 4),
        "transitions": out.transitions,
        "persistent_states": out.persistent_states,
        "workers": out.workers,
        "depth": out.depth - 1,
        "stopped_by": out.stopped_by,
        "complete": out.complete,
        "limits": {"max_states": limits.max_states, "timeout_s": limits.timeout_s},
        "message": summary(describe, out),
    }


def configuration(describe: dict, sha: bool = True) -> str:
    """The configuration in one line: scenario (or the pipeline text's sha256), params, bugs."""
    what = describe["id"] or (f"the pipeline sha256:{describe.get('source_sha256') or '?'}"
                              if sha else "the pipeline")
    what += "".join(f" {k}={v}" for k, v in describe["params"].items())
    if describe["bugs"]:
        what += " bugs=" + ",".join(describe["bugs"])
    return what


def violation(explorer: Explorer, out: Exploration, kind: str, describe: dict) -> dict:
    """One reachable diagnostic kind: its shortest schedule replayed into a trace document.

    A livelock's lasso is replayed as a manual run, which finds the cycle itself (the state
    after the last move is the state after move `cycle_from - 1`, and the cycle is fair), so
    `GET /traces/...?schedule=manual&moves=...` gives the same document."""
    moves = explorer.schedule(out, kind)
    schedule = Schedule("manual", moves=tuple(moves))
    run = Run(explorer.cfg, schedule, describe)
    if kind == LIVELOCK:
        run.extend(schedule.chooser(), len(moves))
        if run.cycle_from is None:
            raise AssertionError("the livelock's lasso does not close on a fair cycle")
    else:
        for mover in moves:
            run.append(run.machine.resolve(mover))
    last = [d for d in run.diagnostics if d["step"] == run.total_steps and d["kind"] == kind]
    if not last or run.total_steps != out.found[kind].steps:
        raise AssertionError(f"the counterexample for {kind} does not replay to it")
    answer = {
        "kind": kind,
        "steps": run.total_steps,
        "shortest": out.is_shortest(kind),
        "diagnostic": last[0],
        "trace": run.document(),
    }
    if run.cycle_from is not None:
        answer["cycle_from"] = run.cycle_from
    return answer


def summary(describe: dict, out: Exploration) -> str:
    """One or two sentences a person reads first."""
    what = configuration(describe, sha=False)
    found = sorted(out.found.values(), key=lambda f: (f.steps, f.kind))
    listed = ", ".join(f"{f.kind} in {f.steps} steps"
                       + (f" (repeating from step {f.cycle_from})" if f.cycle_from else "")
                       for f in found)
    note = f" {out.note}." if out.note else ""
    if (out.cyclic and not out.complete and not out.note
            and out.stopped_by in ("max_states", "timeout", "memory")):
        note = (" The program has a loop that need not end: where its state grows forever (a "
                "counter, a phase count), no limit is enough, and it may not terminate.")
    if out.verdict == "safe":
        return (f"{what}: safe. No schedule reaches a diagnostic ({out.states:,} states "
                f"explored).")
    if out.verdict == "unsafe" and out.stopped_by == "first_violation":
        return (f"{what}: unsafe. The search stopped at its first violation (stop_at_first): "
                f"{listed}; other kinds may be reachable ({out.states:,} states explored).")
    if out.verdict == "unsafe" and not out.complete:
        return (f"{what}: unsafe. A limit ({out.stopped_by}) stopped the search after it found "
                f"{listed}; other kinds may be reachable, and shorter schedules may exist "
                f"({out.states:,} states explored).{note}")
    if out.verdict == "unsafe":
        return f"{what}: unsafe. Shortest schedules: {listed} ({out.states:,} states explored)."
    reason = STOP_REASONS.get(out.stopped_by or "", out.stopped_by)
    if out.states == 0:
        return (f"{what}: inconclusive. Stopped by {reason} before the first state was "
                f"stored.{note}")
    text = (f"{what}: inconclusive. Stopped by {reason} after {out.states:,} states; every "
            f"schedule of at most {out.depth - 1} steps was checked.{note}")
    if found:
        text += f" Found so far (so it is unsafe): {listed}."
    return text


def resolve_source(source: str, params: dict, bugs) -> None:
    """Parse and resolve a pipeline text (in a worker): `PipelineError` / `ParamError` if bad."""
    from app.scenarios import from_source

    from_source(source).resolve(params, bugs)


def check_source_job(source: str, params: dict, bugs, limits: Limits,
                     report: Callable[[dict], None] | None = None,
                     cancel: Event | None = None) -> str:
    """`check_job` for a pipeline text: parsed and resolved here, in the worker, so a large
    text costs the event loop nothing (errors come back as `ParamError` / `PipelineError`)."""
    from app.scenarios import from_source

    scenario = from_source(source)
    return check_job(scenario, scenario.resolve(params, bugs), limits, report, cancel)


CHECK_GRACE_S = 1.0
"""What a check may take past its `timeout_s`: its counterexamples' rebuild and its answer's
encoding (the search itself stops at `timeout_s`)."""
QUEUE_SLACK_S = 0.3


def check_within(until: float | None, fn: Callable, *rest):
    """`fn(*args, limits, report, cancel)` with the time left before `until` (wall clock) as its
    `timeout_s`, minus the grace: a check that waited for a worker still ends by its deadline.
    A wait of under `QUEUE_SLACK_S` keeps the asked limit: the grace covers it. The answer's
    `limits` are the ones asked for either way (the message says what stopped the search)."""
    *args, asked, report, cancel = rest
    left = asked.timeout_s if until is None else until - CHECK_GRACE_S - time.time()
    if left >= asked.timeout_s - QUEUE_SLACK_S:
        return fn(*args, asked, report, cancel)
    limits = replace(asked, timeout_s=max(left, 0.01))
    text = fn(*args, limits, report, cancel)
    ran = json.dumps({"limits": {"max_states": limits.max_states,
                                 "timeout_s": limits.timeout_s}}, separators=(",", ":"))[1:-1]
    given = json.dumps({"limits": {"max_states": asked.max_states,
                                   "timeout_s": asked.timeout_s}}, separators=(",", ":"))[1:-1]
    at = text.rfind(ran)
    return text if at < 0 else text[:at] + given + text[at + len(ran):]


def check_job(scenario: Scenario, cfg: PipelineConfig, limits: Limits,
              report: Callable[[dict], None] | None = None, cancel: Event | None = None) -> str:
    """`check_config` as a worker-process job (app.core.pool): progress goes out as plain dicts,
    `cancel` is the job's shared flag, and the answer comes back as JSON text (encoding a
    counterexample trace takes the event loop tens of milliseconds; the worker has time)."""
    progress = None
    if report is not None:
        def progress(p: Progress) -> None:
            report({"states_explored": p.states, "transitions": p.transitions,
                    "depth": p.depth, "frontier": p.frontier,
                    "elapsed_s": round(p.elapsed_s, 3), "found": p.found})
    lender = pool_lender()
    lent = (None if lender is None
            else Lent(lender.borrow, lender.owed, lender.give_back))
    try:
        answer = check_config(scenario, cfg, limits, progress, cancel, lent=lent,
                              helpers=settings.check_helpers)
    except InternalError:
        raise
    except Exception as err:  # anything else in a worker is a bug too: name the configuration
        raise InternalError(f"internal error while checking "
                            f"{configuration(scenario.describe(cfg))}: "
                            f"{type(err).__name__}: {err}") from err
    try:
        return json.dumps(answer, separators=(",", ":"))
    finally:
        release_memory()  # the worker lives on: hand the search's memory back
