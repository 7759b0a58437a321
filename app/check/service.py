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
from threading import Event

from app.core.config import settings
from app.scenarios import ParamError, Scenario
from app.scenarios import get as get_scenario
from app.sim.config import PipelineConfig
from app.sim.schedule import Schedule
from app.sim.trace import Run

from .engine import Exploration, Explorer, Limits, Progress, release_memory

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
}


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
                 cancel: Event | None = None, reduce: bool = True) -> dict:
    """Explore `cfg` and build the answer, traces included."""
    start = time.perf_counter()
    explorer = Explorer(cfg, reduce)
    out = explorer.explore(limits, progress, cancel)
    describe = scenario.describe(cfg)
    violations = [violation(explorer, out, kind, describe)
                  for kind in sorted(out.found, key=lambda k: (out.found[k].steps, k))]
    return {
        "verdict": out.verdict,
        "violations": violations,
        "states_explored": out.states,
        "elapsed_s": round(time.perf_counter() - start, 4),
        "transitions": out.transitions,
        "depth": out.depth - 1,
        "stopped_by": out.stopped_by,
        "complete": out.complete,
        "limits": {"max_states": limits.max_states, "timeout_s": limits.timeout_s},
        "message": summary(describe, out),
    }


def violation(explorer: Explorer, out: Exploration, kind: str, describe: dict) -> dict:
    """One reachable diagnostic kind: its shortest schedule replayed into a trace document."""
    moves = explorer.schedule(out, kind)
    run = Run(explorer.cfg, Schedule("manual", moves=tuple(moves)), describe)
    for mover in moves:
        run.append(run.machine.resolve(mover))
    last = [d for d in run.diagnostics if d["step"] == run.total_steps and d["kind"] == kind]
    if not last or run.total_steps != out.found[kind].steps:
        raise AssertionError(f"the counterexample for {kind} does not replay to it")
    return {
        "kind": kind,
        "steps": run.total_steps,
        "shortest": out.is_shortest(kind),
        "diagnostic": last[0],
        "trace": run.document(),
    }


def summary(describe: dict, out: Exploration) -> str:
    """One or two sentences a person reads first."""
    what = (describe["id"] or "the pipeline") + "".join(
        f" {k}={v}" for k, v in describe["params"].items())
    if describe["bugs"]:
        what += " bugs=" + ",".join(describe["bugs"])
    found = sorted(out.found.values(), key=lambda f: (f.steps, f.kind))
    listed = ", ".join(f"{f.kind} in {f.steps} steps" for f in found)
    if out.verdict == "safe":
        return (f"{what}: safe. No schedule reaches a diagnostic ({out.states:,} states "
                f"explored).")
    if out.verdict == "unsafe" and out.stopped_by == "first_violation":
        return (f"{what}: unsafe. The search stopped at its first violation (stop_at_first): "
                f"{listed}; other kinds may be reachable ({out.states:,} states explored).")
    if out.verdict == "unsafe" and not out.complete:
        return (f"{what}: unsafe. A limit ({out.stopped_by}) stopped the search after it found "
                f"{listed}; other kinds may be reachable, and shorter schedules may exist "
                f"({out.states:,} states explored).")
    if out.verdict == "unsafe":
        return f"{what}: unsafe. Shortest schedules: {listed} ({out.states:,} states explored)."
    reason = STOP_REASONS.get(out.stopped_by or "", out.stopped_by)
    text = (f"{what}: inconclusive. Stopped by {reason} after {out.states:,} states; every "
            f"schedule of at most {out.depth - 1} steps was checked.")
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
    try:
        return json.dumps(check_config(scenario, cfg, limits, progress, cancel),
                          separators=(",", ":"))
    finally:
        release_memory()  # the worker lives on: hand the search's memory back
