"""A trace document (docs/trace-format.md) as a Chrome Trace Event Format file, which Perfetto
(ui.perfetto.dev) and chrome://tracing open: the inspector's run on a timeline GPU engineers know.

One process per trace; one thread track per agent, one for the TMA engine and one for the tensor
core, each step a complete slice (`ph: "X"`) on the track of whoever moved, so every step appears
exactly once (`cat: "step"`, `args.step`). Waits are slices beside the step that ends them; copies
and tensor-core work in flight are slices on lane tracks under their engine (they overlap, and one
track's slices must nest). Each barrier is a counter (`ph: "C"`: pending arrivals, tx-count,
completed phases); each diagnostic an instant event (`ph: "i"`) on its agent's track.

Time: a simulated step k lasts `SIM_STEP_US` (1 us) from (k-1) us, so the state after step k holds
from k us. A GPU trace (`source.kind == "gpu"`) places step k at its `time_ns` (the %globaltimer
clock, counted from `source.globaltimer_start_ns`) as a zero-length slice, and a wait as the
`waited_ns` the kernel measured before it returned. Steps the log does not time (`tma` landings,
bookkeeping lines) carry `args.reconstructed = true`; so do copies in flight, whose ends are
landings. Counters, waits of simulated traces and work in flight come from snapshots: a trace
fetched with `snapshots=false` exports steps and diagnostics only.
"""

from __future__ import annotations

import json
from functools import cache
from importlib import resources

FORMAT = "mbarrier-inspector/perfetto"
VERSION = 1
SIM_STEP_US = 1.0
"""Trace time of one simulated step, in microseconds (the format's unit)."""
PID = 1
LANE_TID = 1000
"""Lane tracks (work in flight) are numbered from here, after the agents and the engines."""
ENGINES = ("tma", "tensor_core")
ENGINE_TITLES = {"tma": "TMA engine", "tensor_core": "tensor core"}
COUNTER_FIELDS = ("pending_arrivals", "tx_count", "phase")


@cache
def trace_event_schema() -> dict:
    """The JSON Schema this export is tested against, written from the format's specification."""
    text = resources.files("app.export").joinpath("trace_event_schema.json").read_text()
    return json.loads(text)


def _us(value: float) -> float:
    """Microseconds to whole nanoseconds: no float noise, and `round(ts * 1000)` is exact."""
    return round(value, 3)


class _Clock:
    """Where each step sits on the timeline, in microseconds."""

    def __init__(self, doc: dict):
        self.gpu = doc["source"].get("kind") == "gpu"
        self.times = {s["step"]: s.get("time_ns") for s in doc["steps"]}

    def start(self, step: dict) -> float:
        if self.gpu:
            return step["time_ns"] / 1000
        return (step["step"] - 1) * SIM_STEP_US

    def duration(self) -> float:
        return 0.0 if self.gpu else SIM_STEP_US

    def end(self, step: dict) -> float:
        return self.start(step) + self.duration()

    def at_step(self, number: int, steps: list[dict]) -> float:
        """The time of step `number`; before the window's first step: the window's start."""
        first = steps[0]["step"] if steps else number
        if steps and first <= number <= steps[-1]["step"]:
            return self.start(steps[number - first])
        if steps and self.gpu:
            return self.start(steps[0] if number < first else steps[-1])
        return max(number - 1, 0) * SIM_STEP_US


class _Lanes:
    """Slices that may overlap, spread over as few non-overlapping lane tracks as they need."""

    def __init__(self, engine: str, first_tid: int):
        self.engine = engine
        self.first_tid = first_tid
        self.ends: list[float] = []

    def place(self, begin: float, end: float) -> int:
        for lane, lane_end in enumerate(self.ends):
            if lane_end <= begin:
                self.ends[lane] = end
                return self.first_tid + lane
        self.ends.append(end)
        return self.first_tid + len(self.ends) - 1


def _in_flight_key(snapshot: dict, queue: str) -> dict[tuple, dict]:
    """Items of a snapshot's `tma` or `tensor_core` queue by (op, nth of that name)."""
    seen: dict[str, int] = {}
    out = {}
    for item in snapshot.get(queue, []):
        op = str(item.get("op"))
        out[(op, seen.get(op, 0))] = item
        seen[op] = seen.get(op, 0) + 1
    return out


def _work_name(item: dict) -> str:
    direction = item.get("direction") or item.get("kind") or "op"
    tile = item.get("tile")
    stage = item.get("stage")
    text = f"{direction} tile {tile}" if tile is not None else str(direction)
    return f"{text} -> {stage}" if stage else text


def _wait_name(waiting_on: dict | None) -> str:
    if not waiting_on:
        return "wait"
    if "barrier" in waiting_on:
        return f"wait {waiting_on['barrier']} parity {waiting_on.get('parity')}"
    return "wait " + ", ".join(f"{k}={v}" for k, v in waiting_on.items())


def to_chrome_trace(doc: dict) -> dict:
    """The Chrome Trace Event Format (JSON object form) of one trace document."""
    clock = _Clock(doc)
    steps = doc["steps"]
    source = doc["source"]
    observed = {o["step"]: o for o in source.get("observed", []) if "step" in o}
    window = doc.get("window", {"from": 1, "to": len(steps)})
    starts_at_initial = window.get("from", 1) == 1

    names = [a["name"] for a in doc["layout"]["agents"]]
    tids = {name: i + 1 for i, name in enumerate(names)}
    for engine in ENGINES:
        tids[engine] = len(tids) + 1
    for step in steps:
        tids.setdefault(step["agent"], len(tids) + 1)

    events: list[dict] = []
    lanes = {engine: _Lanes(engine, LANE_TID + 100 * i) for i, engine in enumerate(ENGINES)}
    track_end = dict.fromkeys(tids.values(), 0.0)

    def slice_(name, cat, tid, ts, dur, args) -> None:
        ts, dur = _us(ts), _us(dur)
        events.append({"name": name, "cat": cat, "ph": "X", "ts": ts, "dur": dur,
                       "pid": PID, "tid": tid, "args": args})
        track_end[tid] = max(track_end.get(tid, 0.0), ts + dur)

    # simulated waits: from the snapshot where an agent starts waiting to when it may move again
    waiting: dict[str, tuple[float, dict | None, int]] = {}

    def close_wait(agent: str, at: float, step_number: int, unfinished: bool = False) -> None:
        begin, on, since = waiting.pop(agent)
        if at > begin:
            args = {"waiting_on": on, "since_step": since, "until_step": step_number}
            if unfinished:
                args["unfinished"] = True
            slice_(_wait_name(on), "wait", tids[agent], begin, at - begin, args)

    def note_waits(snapshot: dict, at: float, step_number: int) -> None:
        for agent in snapshot.get("agents", []):
            name = agent["name"]
            if agent.get("status") == "waiting" and name not in waiting and name in tids:
                waiting[name] = (at, agent.get("waiting_on"), step_number)
            elif agent.get("status") != "waiting" and name in waiting:
                close_wait(name, at, step_number)

    # work in flight (TMA copies, tensor-core ops): from the snapshot that first lists an item
    flight: dict[tuple[str, tuple], tuple[float, int, dict]] = {}

    def close_work(engine: str, key: tuple, at: float, step_number: int,
                   unfinished: bool = False) -> None:
        begin, since, item = flight.pop((engine, key))
        args = {**item, "issued_step": since, "done_step": step_number}
        if clock.gpu:
            args["reconstructed"] = True
        if unfinished:
            args["unfinished"] = True
        tid = lanes[engine].place(begin, at)
        slice_(_work_name(item), f"{engine},in_flight", tid, begin, at - begin, args)

    def note_work(snapshot: dict, begin: float, end: float, step_number: int) -> None:
        for engine in ENGINES:
            present = _in_flight_key(snapshot, engine)
            for key, item in present.items():
                if (engine, key) not in flight:
                    flight[(engine, key)] = (begin, step_number, item)
            for (eng, key) in [k for k in flight if k[0] == engine and k[1] not in present]:
                close_work(eng, key, end, step_number)

    # barrier counters: the initial state, then every change
    last_counter: dict[str, tuple] = {}

    def note_counters(snapshot: dict, at: float) -> None:
        for barrier in snapshot.get("barriers", []):
            values = tuple(barrier.get(f, 0) for f in COUNTER_FIELDS)
            if last_counter.get(barrier["name"]) == values:
                continue
            last_counter[barrier["name"]] = values
            events.append({"name": barrier["name"], "cat": "barrier", "ph": "C", "ts": _us(at),
                           "pid": PID, "args": dict(zip(COUNTER_FIELDS, values, strict=True))})

    if starts_at_initial and doc.get("initial"):
        first_at = clock.start(steps[0]) if steps and clock.gpu else 0.0
        note_counters(doc["initial"], first_at)
        if not clock.gpu:
            note_waits(doc["initial"], 0.0, 0)

    for step in steps:
        number, agent, tid = step["step"], step["agent"], tids[step["agent"]]
        start, end = clock.start(step), clock.end(step)
        args = {"step": number, "op": step["op"], "line": step.get("line"),
                "operands": step.get("operands", {}),
                "events": step.get("events", []),
                "diagnostics": [d["kind"] for d in step.get("diagnostics", [])]}
        if clock.gpu:
            args["time_ns"] = step["time_ns"]
            args["reconstructed"] = number not in observed
            seen = observed.get(number)
            if seen is not None:
                args["observed"] = {k: v for k, v in seen.items() if k not in ("step", "agent")}
            if seen is not None and "waited_ns" in seen:
                waited = seen["waited_ns"] / 1000
                begin = max(start - waited, track_end.get(tid, 0.0), 0.0)
                wait_args = {"waited_ns": seen["waited_ns"], "returned_step": number,
                             "wait_complete": seen.get("wait_complete"),
                             "tries": seen.get("tries"), "reconstructed": False}
                if begin > start - waited:
                    wait_args["begin_clipped"] = True
                slice_(_wait_name(step.get("operands")), "wait", tid, begin, start - begin,
                       wait_args)
        elif agent in waiting:
            close_wait(agent, start, number)
        slice_(step["op"], "step", tid, start, clock.duration(), args)
        snapshot = step.get("snapshot")
        if snapshot is not None:
            note_work(snapshot, start, end, number)
            note_counters(snapshot, end)
            if not clock.gpu:
                note_waits(snapshot, end, number)

    finish = max((clock.end(s) for s in steps), default=0.0)
    last_number = steps[-1]["step"] if steps else 0
    for agent in list(waiting):
        close_wait(agent, finish, last_number, unfinished=True)
    for engine, key in list(flight):
        close_work(engine, key, finish, last_number, unfinished=True)

    first, last = window.get("from", 1), window.get("to", last_number)
    for diagnostic in doc.get("diagnostics", []):
        if not first - 1 <= diagnostic.get("step", 0) <= last:
            continue
        named = [a for a in diagnostic.get("agents", []) if a in tids]
        instant = {"name": diagnostic["kind"], "cat": "diagnostic", "ph": "i",
                   "ts": _us(clock.at_step(diagnostic["step"], steps)), "pid": PID,
                   "args": {k: v for k, v in diagnostic.items() if k != "kind"}}
        if named:
            instant.update(tid=tids[named[0]], s="t")
        else:
            instant["s"] = "p"
        events.append(instant)

    return {
        "traceEvents": _metadata(doc, tids, lanes) + events,
        "displayTimeUnit": "ns",
        "otherData": _other_data(doc, clock),
    }


def _metadata(doc: dict, tids: dict[str, int], lanes: dict[str, _Lanes]) -> list[dict]:
    """Process and thread names (`ph: "M"`), and their order on screen."""
    scenario = doc["scenario"]
    source = doc["source"]
    if source.get("kind") == "gpu":
        title = f"{scenario['id']} on {source.get('device', 'a GPU')} (CTA 0)"
    else:
        title = f"{scenario['id']} (simulation, 1 us = 1 step)"
    if scenario.get("bugs"):
        title += " bugs: " + ", ".join(scenario["bugs"])
    out = [{"name": "process_name", "ph": "M", "pid": PID, "args": {"name": title}}]

    def thread(tid: int, name: str) -> None:
        out.append({"name": "thread_name", "ph": "M", "pid": PID, "tid": tid,
                    "args": {"name": name}})
        out.append({"name": "thread_sort_index", "ph": "M", "pid": PID, "tid": tid,
                    "args": {"sort_index": tid}})

    for name, tid in tids.items():
        thread(tid, ENGINE_TITLES.get(name, name))
    for engine, lane_set in lanes.items():
        what = "copies in flight" if engine == "tma" else "work in flight"
        for i in range(len(lane_set.ends)):
            thread(lane_set.first_tid + i, f"{ENGINE_TITLES[engine]}: {what} #{i}")
    return out


def _other_data(doc: dict, clock: _Clock) -> dict:
    """What the timeline is (shown as metadata by chrome://tracing and Perfetto)."""
    source = doc["source"]
    out = {
        "format": FORMAT,
        "version": VERSION,
        "scenario": doc["scenario"]["id"],
        "source_kind": source.get("kind"),
        "status": doc.get("status"),
        "window_from": doc.get("window", {}).get("from"),
        "window_to": doc.get("window", {}).get("to"),
        "total_steps": doc.get("total_steps"),
    }
    if clock.gpu:
        out["time_base"] = ("ts is %globaltimer ns / 1000 since globaltimer_start_ns; "
                            "args.reconstructed marks what the log does not time")
        for key in ("device", "driver", "cuda", "captured_at", "globaltimer_start_ns",
                    "clock_ghz"):
            if key in source:
                out[key] = source[key]
    else:
        out["time_base"] = f"simulated: step k spans [(k-1), k) * {SIM_STEP_US} us"
    return out
