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
`waited_ns` the kernel measured before it returned (where the log has it). Steps the log does not
time (`tma` landings, which the replay infers) carry `args.reconstructed = true`; so do copies in
flight, whose ends are landings. Counters, waits of simulated traces and work in flight come from
snapshots: a trace fetched with `snapshots=false` exports steps and diagnostics only.
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
    return _Export(doc).build()


class _Export:
    """One pass over a trace's steps, emitting each step, and the waits, work in flight and
    barrier values its snapshots show, as events."""

    def __init__(self, doc: dict):
        self.doc = doc
        self.clock = _Clock(doc)
        self.steps = doc["steps"]
        self.window = doc.get("window", {"from": 1, "to": len(self.steps)})
        self.observed = {o["step"]: o for o in doc["source"].get("observed", []) if "step" in o}
        self.tids = {a["name"]: i + 1 for i, a in enumerate(doc["layout"]["agents"])}
        for name in [*ENGINES, *(s["agent"] for s in self.steps)]:
            self.tids.setdefault(name, len(self.tids) + 1)
        self.lanes = {e: _Lanes(e, LANE_TID + 100 * i) for i, e in enumerate(ENGINES)}
        self.events: list[dict] = []
        self.track_end: dict[int, float] = {}
        self.waiting: dict[str, tuple[float, dict | None, int]] = {}
        self.flight: dict[tuple[str, tuple], tuple[float, int, dict]] = {}
        self.counters: dict[str, tuple] = {}

    def build(self) -> dict:
        initial = self.doc.get("initial")
        if self.window.get("from", 1) == 1 and initial:
            gpu_start = self.clock.start(self.steps[0]) if self.steps and self.clock.gpu else 0.0
            self.note_counters(initial, gpu_start)
            if not self.clock.gpu:
                self.note_waits(initial, 0.0, 0)
        for step in self.steps:
            self.add_step(step)
        self.close_all()
        self.add_diagnostics()
        return {
            "traceEvents": _metadata(self.doc, self.tids, self.lanes) + self.events,
            "displayTimeUnit": "ns",
            "otherData": _other_data(self.doc, self.clock),
        }

    def slice(self, name: str, cat: str, tid: int, ts: float, dur: float, args: dict) -> None:
        ts, dur = _us(ts), _us(dur)
        self.events.append({"name": name, "cat": cat, "ph": "X", "ts": ts, "dur": dur,
                            "pid": PID, "tid": tid, "args": args})
        self.track_end[tid] = max(self.track_end.get(tid, 0.0), ts + dur)

    # ------------------------------------------------------------------------------ steps

    def add_step(self, step: dict) -> None:
        """The step's slice on its mover's track, after the wait it ended (if any)."""
        number, agent = step["step"], step["agent"]
        tid = self.tids[agent]
        start, end = self.clock.start(step), self.clock.end(step)
        args = {"step": number, "op": step["op"], "line": step.get("line"),
                "operands": step.get("operands", {}), "events": step.get("events", []),
                "diagnostics": [d["kind"] for d in step.get("diagnostics", [])]}
        if self.clock.gpu:
            seen = self.observed.get(number)
            args["time_ns"] = step["time_ns"]
            args["reconstructed"] = agent in ENGINES
            if seen is not None:
                args["observed"] = {k: v for k, v in seen.items() if k not in ("step", "agent")}
                if "waited_ns" in seen:
                    self.add_gpu_wait(step, seen, tid, start)
        elif agent in self.waiting:
            self.close_wait(agent, start, number)
        self.slice(step["op"], "step", tid, start, self.clock.duration(), args)
        snapshot = step.get("snapshot")
        if snapshot is not None:
            self.note_work(snapshot, start, end, number)
            self.note_counters(snapshot, end)
            if not self.clock.gpu:
                self.note_waits(snapshot, end, number)

    def add_gpu_wait(self, step: dict, seen: dict, tid: int, returned: float) -> None:
        """The wait the kernel measured: `waited_ns` up to when it returned, clipped so that it
        neither starts before the track's previous event nor before the log's first one."""
        wanted = returned - seen["waited_ns"] / 1000
        begin = max(wanted, self.track_end.get(tid, 0.0), 0.0)
        args = {"waited_ns": seen["waited_ns"], "returned_step": step["step"],
                "wait_complete": seen.get("wait_complete"), "tries": seen.get("tries"),
                "reconstructed": False}
        if begin > wanted:
            args["begin_clipped"] = True
        self.slice(_wait_name(step.get("operands")), "wait", tid, begin, returned - begin, args)

    # -------------------------------------------------------- from snapshots: waits (simulated)

    def note_waits(self, snapshot: dict, at: float, number: int) -> None:
        """A wait runs from the snapshot where an agent is `waiting` to the one where it is not
        (or to its own next step, whichever comes first)."""
        for agent in snapshot.get("agents", []):
            name = agent["name"]
            if agent.get("status") == "waiting" and name not in self.waiting and name in self.tids:
                self.waiting[name] = (at, agent.get("waiting_on"), number)
            elif agent.get("status") != "waiting" and name in self.waiting:
                self.close_wait(name, at, number)

    def close_wait(self, agent: str, at: float, number: int, unfinished: bool = False) -> None:
        begin, on, since = self.waiting.pop(agent)
        if at > begin:
            args = {"waiting_on": on, "since_step": since, "until_step": number}
            if unfinished:
                args["unfinished"] = True
            self.slice(_wait_name(on), "wait", self.tids[agent], begin, at - begin, args)

    # ------------------------------------------------ from snapshots: work in flight, counters

    def note_work(self, snapshot: dict, begin: float, end: float, number: int) -> None:
        """TMA copies and tensor-core ops: from the step whose snapshot first lists one to the
        step after which it is gone."""
        for engine in ENGINES:
            present = _in_flight_key(snapshot, engine)
            for key, item in present.items():
                self.flight.setdefault((engine, key), (begin, number, item))
            for gone in [k for k in self.flight if k[0] == engine and k[1] not in present]:
                self.close_work(gone, end, number)

    def close_work(self, key: tuple[str, tuple], at: float, number: int,
                   unfinished: bool = False) -> None:
        engine = key[0]
        begin, since, item = self.flight.pop(key)
        args = {**item, "issued_step": since, "done_step": number}
        if self.clock.gpu:
            args["reconstructed"] = True
        if unfinished:
            args["unfinished"] = True
        tid = self.lanes[engine].place(begin, at)
        self.slice(_work_name(item), f"{engine},in_flight", tid, begin, at - begin, args)

    def note_counters(self, snapshot: dict, at: float) -> None:
        """Each barrier's values whenever they change."""
        for barrier in snapshot.get("barriers", []):
            values = tuple(barrier.get(f, 0) for f in COUNTER_FIELDS)
            if self.counters.get(barrier["name"]) == values:
                continue
            self.counters[barrier["name"]] = values
            self.events.append({"name": barrier["name"], "cat": "barrier", "ph": "C",
                                "ts": _us(at), "pid": PID,
                                "args": dict(zip(COUNTER_FIELDS, values, strict=True))})

    # -------------------------------------------------------------------------- the end

    def close_all(self) -> None:
        """Waits and work still open when the trace (or its window) ends: `unfinished`."""
        finish = max((self.clock.end(s) for s in self.steps), default=0.0)
        last = self.steps[-1]["step"] if self.steps else 0
        for agent in list(self.waiting):
            self.close_wait(agent, finish, last, unfinished=True)
        for key in list(self.flight):
            self.close_work(key, finish, last, unfinished=True)

    def add_diagnostics(self) -> None:
        """Every diagnostic of the window at its step, on the first agent it names."""
        first = self.window.get("from", 1)
        last = self.window.get("to", self.steps[-1]["step"] if self.steps else 0)
        for diagnostic in self.doc.get("diagnostics", []):
            if not first - 1 <= diagnostic.get("step", 0) <= last:
                continue
            named = [a for a in diagnostic.get("agents", []) if a in self.tids]
            instant = {"name": diagnostic["kind"], "cat": "diagnostic", "ph": "i",
                       "ts": _us(self.clock.at_step(diagnostic["step"], self.steps)),
                       "pid": PID, "args": {k: v for k, v in diagnostic.items() if k != "kind"}}
            if named:
                instant.update(tid=self.tids[named[0]], s="t")
            else:
                instant["s"] = "p"
            self.events.append(instant)


def _metadata(doc: dict, tids: dict[str, int], lanes: dict[str, _Lanes]) -> list[dict]:
    """Process and thread names (`ph: "M"`), and their order on screen."""
    scenario = doc["scenario"]
    source = doc["source"]
    if source.get("kind") == "gpu":
        device = source.get("device") or {}
        name = device.get("device") if isinstance(device, dict) else device
        title = f"{scenario['id'] or source.get('id')} on {name or 'a GPU'} " \
                f"(CTA {source.get('cta', 0)})"
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


def run_name(doc: dict) -> str:
    """What the run is, as a file name's stem: the scenario (a pasted pipeline: `pipeline-` and
    its sha256's first 12 digits; a GPU trace: its replay id), then the bug toggles, then the
    schedule when it is not round-robin: `double_buffer_tma-forget_phase_toggle-random7`. A
    buggy run's download is never named as the correct run's."""
    scenario = doc["scenario"]
    source = doc["source"]
    if source.get("kind") == "gpu" and source.get("id"):
        return _file_word(source["id"])  # a replay id already names its toggles
    stem = scenario.get("id") or f"pipeline-{(scenario.get('source_sha256') or '')[:12]}"
    parts = [stem, *scenario.get("bugs", ())]
    schedule = scenario.get("schedule") or {}
    if schedule.get("kind") == "random":
        parts.append(f"random{schedule.get('seed', 0)}")
    elif schedule.get("kind") == "manual":
        parts.append("manual")
    return "-".join(_file_word(p) for p in parts)


def file_name(doc: dict) -> str:
    """The download's file name: `run_name(doc)` and `.perfetto.json`."""
    return f"{run_name(doc)}.perfetto.json"


def _file_word(text: str) -> str:
    """`text` with anything but letters, digits, `_`, `-` and `.` as `_` (header-safe)."""
    return "".join(c if c.isascii() and (c.isalnum() or c in "_-.") else "_" for c in text)


def _schedule(schedule: dict) -> dict:
    """The run's schedule, a manual one's moves as their count (the steps' movers list them)."""
    out = {k: v for k, v in schedule.items() if k != "moves"}
    if "moves" in schedule:
        out["moves"] = len(schedule["moves"])
    return out


def _other_data(doc: dict, clock: _Clock) -> dict:
    """What the timeline is (shown as metadata by chrome://tracing and Perfetto)."""
    source = doc["source"]
    out = {
        "format": FORMAT,
        "version": VERSION,
        "scenario": doc["scenario"]["id"],
        "run": run_name(doc),
        "bugs": list(doc["scenario"].get("bugs", ())),
        "params": dict(doc["scenario"].get("params") or {}),
        "schedule": _schedule(doc["scenario"].get("schedule") or {}),
        "source_kind": source.get("kind"),
        "status": doc.get("status"),
        "window_from": doc.get("window", {}).get("from"),
        "window_to": doc.get("window", {}).get("to"),
        "total_steps": doc.get("total_steps"),
    }
    if clock.gpu:
        out["time_base"] = ("ts is the step's time_ns / 1000, the GPU clock since the log's "
                            "first event; args.reconstructed marks what the log does not time")
        for key in ("device", "driver", "cuda", "captured_at", "globaltimer_start_ns",
                    "clock_ghz"):
            if key in source:
                out[key] = source[key]
    else:
        out["time_base"] = f"simulated: step k spans [(k-1), k) * {SIM_STEP_US} us"
    return out
