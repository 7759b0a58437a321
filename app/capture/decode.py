"""Turns a raw GPU event log (what `app.capture.runner` returns) into a trace, format v1.

The log holds what the hardware showed each thread: per event its `%clock64` and `%globaltimer`,
the agent, the operation, the barrier, the token an arrive returned (parity and pending arrivals of
the phase it arrived on), the result of each bounded `try_wait.parity` loop, and what a warp found
when it checked a tile word by word. Everything else in the trace is *reconstructed*: the barrier
states, the moments TMA chunks landed (steps by the agent `tma`) and bulk stores read SMEM, found by
replaying the log through the barrier model (`app.replay.model`). The trace says so in `source`,
keeps every observation beside the step it belongs to (`source.observed`), and pins what the
hardware did to diagnostics: a wait that returned on an earlier phase (`stale_wait`), a tile read
with wrong words (`partial_read`, `stale_read`, naming the words), a wait that gave up
(`deadlock`), a kernel that trapped (`hardware_trap`), and an observation the model cannot explain
(`divergence`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from app.capture import kernels as K
from app.replay.model import Action, Op, Replay
from app.sim.barrier import Mbarrier

FORMAT = "mbarrier-inspector/trace"
VERSION = 1
ENGINE = "mbarrier-inspector 0.1.0"
DEFAULT_CLOCK_GHZ = 1.98

OPS = {
    "init": "mbarrier.init",
    "arrive_expect_tx": "mbarrier.arrive.expect_tx",
    "arrive": "mbarrier.arrive",
    "wait": "mbarrier.try_wait.parity",
    "wait_full": "mbarrier.try_wait.parity",
    "wait_empty": "mbarrier.try_wait.parity",
    "release": "mbarrier.arrive",
    "tma_load": "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes",
    "land": "cp.async.bulk (chunk lands)",
    "stored": "cp.async.bulk (chunk stored)",
    "read": "ld.shared",
    "tma_store": "cp.async.bulk.global.shared::cta.bulk_group",
    "bulk_commit": "cp.async.bulk.commit_group",
    "bulk_wait_read": "cp.async.bulk.wait_group.read",
    "bulk_wait_all": "cp.async.bulk.wait_group",
    "write": "st.shared",
    "proxy_fence": "fence.proxy.async.shared::cta",
}
"""Trace op spellings (PTX), shared with the simulator's traces."""


class DecodeError(ValueError):
    """A raw log that cannot be decoded; the message names what is wrong."""


@dataclass
class Record:
    """One log record, unpacked (docs/gpu-capture.md, "The log record")."""

    cta: int
    slot: int
    clock: int
    globaltimer: int
    op: int
    barrier: int
    tile: int
    a: int
    b: int
    token: int
    result: int
    extra: int
    seq: int = 0

    @property
    def order_clock(self) -> int:
        """The clock the record is ordered by: logged before arrives and issues, after waits."""
        return self.clock

    @classmethod
    def unpack(cls, row: list[int], seq: int) -> Record:
        if len(row) != 2 + K.RECORD_WORDS:
            raise DecodeError(f"records[{seq}]: expected {2 + K.RECORD_WORDS} integers")
        cta, slot, w0, w1, w2, w3, w4, w5, w6, w7 = (int(v) for v in row)
        return cls(cta=cta, slot=slot, clock=w0, globaltimer=w1, op=w2 & 0xFF,
                   barrier=(w2 >> 16) & 0xFF, tile=(w2 >> 32) & 0xFFFFFFFF, a=w3, b=w4,
                   token=w5, result=w6, extra=w7, seq=seq)


# ----------------------------------------------------------------------------- the programs


def programs(scenario: str, bugs: set[str], stages: int, tile_bytes: int, chunk_bytes: int,
             timeout_us: float) -> dict[str, list[tuple[str, str]]]:
    """Each agent's program as (line kind, text): the code the kernel runs, in CUTLASS's words."""
    chunks = tile_bytes // chunk_bytes
    announced = tile_bytes
    note = ""
    if "expect_tx_short" in bugs:
        announced, note = tile_bytes - chunk_bytes, f"  // BUG: the tile is {tile_bytes} bytes"
    elif "expect_tx_long" in bugs:
        announced, note = tile_bytes + chunk_bytes, f"  // BUG: the tile is {tile_bytes} bytes"
    load = (f"cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes "
            f"[smem + c*{chunk_bytes}], [tile + c*{chunk_bytes}], {chunk_bytes}, [bar];"
            f"  // c = 0..{chunks - 1}")
    bounded = f"  // bounded: gives up after {timeout_us:g} us"
    if scenario == "single_barrier":
        advance = ("i += 1;  // BUG: phase ^= 1 is missing" if "forget_phase_toggle" in bugs
                   else "phase ^= 1; i += 1;")
        return {"thread": [
            ("init", "mbarrier.init.shared::cta.b64 [bar], 1;"),
            ("arrive_expect_tx",
             f"mbarrier.arrive.expect_tx.shared::cta.b64 state, [bar], {announced};{note}"),
            ("tma_load", load),
            ("wait_full", "mbarrier.try_wait.parity.shared::cta.b64 p, [bar], phase;" + bounded),
            ("read", "ld.shared  tile <- [smem];  // the warp checks every word"),
            ("advance", advance),
        ]}
    if scenario == "proxy_fence_store":
        lines = [
            ("bulk_wait_read",
             f"cp.async.bulk.wait_group.read {stages - 1};  // smem[index] is free again"),
            ("write", "st.shared  smem[index] <- tile[count];  // generic proxy, 32 lanes"),
        ]
        if "missing_proxy_fence" not in bugs:
            lines.append(("proxy_fence",
                          "fence.proxy.async.shared::cta;  // make it visible to the TMA"))
        lines += [
            ("tma_store", f"cp.async.bulk.global.shared::cta.bulk_group out[count], smem[index], "
                          f"{tile_bytes};"),
            ("bulk_commit", "cp.async.bulk.commit_group;"),
            ("advance", "index = (index + 1) % stages; count += 1;"),
            ("bulk_wait_all", "cp.async.bulk.wait_group 0;  // every store has completed"),
        ]
        return {"writer": lines}
    advance = "++pipe_state;  // index = (index + 1) % stages; phase ^= (index == 0)"
    no_toggle = "++pipe_state;  // BUG: index wraps but phase is never flipped"
    producer = []
    if "producer_skips_empty_wait" not in bugs:
        producer.append(("wait_empty", "producer_acquire: mbarrier.try_wait.parity "
                                       "empty_barrier[index], phase;" + bounded))
    producer += [
        ("arrive_expect_tx",
         f"mbarrier.arrive.expect_tx full_barrier[index], {announced};{note}"),
        ("tma_load", load.replace("[bar]", "full_barrier[index]")),
        ("advance", no_toggle if "forget_producer_phase_toggle" in bugs else advance),
    ]
    consumer = [
        ("wait_full", "consumer_wait: mbarrier.try_wait.parity full_barrier[index], phase;"
                      + bounded),
        ("read", "ld.shared  tile <- smem[index];  // the warp checks every word"),
        ("tma_store", f"cp.async.bulk.global.shared::cta.bulk_group out[count], smem[index], "
                      f"{tile_bytes};"),
        ("bulk_commit", "cp.async.bulk.commit_group;"),
        ("bulk_wait_read", "cp.async.bulk.wait_group.read 0;  // the store has read smem[index]"),
    ]
    if "consumer_skips_release" not in bugs:
        consumer.append(("release", "consumer_release: mbarrier.arrive empty_barrier[index];"))
    consumer.append(("advance", no_toggle if "forget_phase_toggle" in bugs else advance))
    return {"producer": producer, "consumer0": consumer, "consumer1": list(consumer)}


# ------------------------------------------------------------------------------- agent state


@dataclass
class AgentState:
    name: str
    role: str
    program: list[tuple[str, str]]
    loop_start: int
    pc: int = 0
    count: int = 0
    index: int = 0
    phase: int = 0
    stuck: dict | None = None
    waiting_from: int | None = None
    waiting_on: dict | None = None
    lines: dict[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.lines = {kind: i for i, (kind, _) in enumerate(self.program)}

    @property
    def done(self) -> bool:
        return self.pc >= len(self.program)

    def registers(self) -> dict:
        if self.role == "thread":
            return {"phase": self.phase}
        if self.role == "writer":
            return {"index": self.index, "count": self.count}
        return {"index": self.index, "phase": self.phase, "count": self.count}


# ---------------------------------------------------------------------------------- decoding


class Decoder:
    """Builds one trace document from one raw log (the first logged CTA)."""

    def __init__(self, raw: dict):
        if raw.get("format") != "mbarrier-inspector/raw-gpu-log":
            raise DecodeError("format: not a raw GPU log (mbarrier-inspector/raw-gpu-log)")
        cfg = raw.get("config")
        if not isinstance(cfg, dict) or "scenario" not in cfg:
            raise DecodeError("config: missing or without a scenario")
        self.raw = raw
        self.cfg = cfg
        self.scenario = cfg["scenario"]
        self.bugs = set(cfg.get("bugs", []))
        self.stages = int(cfg.get("stages", 1))
        self.tiles = int(cfg["tiles"])
        self.tile_bytes = int(cfg["tile_bytes"])
        self.chunk_bytes = int(cfg["chunk_bytes"])
        self.chunks = self.tile_bytes // self.chunk_bytes
        self.consumers = int(cfg.get("consumers", 1))
        self.words = self.tile_bytes // 4
        self.agent_slots = list(raw.get("agents") or [])
        self._setup_names()
        progs = programs(self.scenario, self.bugs, self.stages, self.tile_bytes,
                         self.chunk_bytes, float(cfg.get("timeout_us", 0)))
        self.agents: dict[str, AgentState] = {}
        for name in self.agent_slots:
            role = "consumer" if name.startswith("consumer") else name
            loop = 1 if name == "thread" else 0
            agent = AgentState(name, role, progs[name], loop)
            agent.phase = 1 if role == "producer" else 0
            self.agents[name] = agent
        self.records = self._records()
        self.steps: list[dict] = []
        self.diagnostics: list[dict] = []
        self.observed: list[dict] = []
        self.stage_tile: list[int | None] = [None] * len(self.stage_names)
        self.chunk_state = [[[None, None, False] for _ in range(self.chunks)]
                            for _ in self.stage_names]
        self.loads: dict[str, dict] = {}
        self.stores: list[dict] = []
        self.committed: dict[str, int] = {}
        self.released: dict[int, int] = {}
        self.status = "running"
        self.figures = {"tiles_read": 0, "tiles_read_wrong": 0, "stale_waits": 0,
                        "timeouts": 0, "divergences": 0, "reordered": 0, "landings_inferred": 0}
        self._fit_clock()

    # ------------------------------------------------------------------------------- setup

    def _setup_names(self) -> None:
        """Barrier and stage names and the barriers' init counts come from the scenario's
        pipeline (compiled with this capture's parameters and toggles); only the mapping from
        the kernel's barrier ids to them is the kernel's own."""
        from app.scenarios import get as get_scenario

        scenario = get_scenario(self.scenario)
        values = {"stages": self.stages, "tiles": self.tiles, "tile_bytes": self.tile_bytes,
                  "chunk_bytes": self.chunk_bytes, "consumers": self.consumers}
        params = {k: v for k, v in values.items() if k in scenario.parameters}
        program = scenario.resolve(params, sorted(self.bugs & set(scenario.bugs))).program
        self.barrier_names = [b.name for b in program.barriers]
        self.init_counts = [b.init_count for b in program.barriers]
        self.stage_names = [s.name for s in program.stages]
        s = self.stages
        if self.scenario == "double_buffer_tma":  # the kernel numbers empty barriers from 8
            self.barrier_index = {i: i for i in range(s)} | {8 + i: s + i for i in range(s)}
        else:
            self.barrier_index = {i: i for i in range(len(self.barrier_names))}

    def _records(self) -> list[Record]:
        rows = self.raw.get("records")
        if not isinstance(rows, list):
            raise DecodeError("records: missing or not a list")
        records = [Record.unpack(row, n) for n, row in enumerate(rows)]
        first = min((r.cta for r in records), default=0)
        records = [r for r in records if r.cta == first]
        # Clock anchors: OP_ANCHOR records (and any record that carries a %globaltimer reading).
        self.anchors = [r for r in records if r.globaltimer]
        records = [r for r in records if r.op != K.OP_ANCHOR]
        for r in records:
            if not 0 <= r.slot < len(self.agent_slots):
                raise DecodeError(f"records[{r.seq}]: agent slot {r.slot} is not in agents")
            if r.op not in K.OP_NAMES:
                raise DecodeError(f"records[{r.seq}]: unknown op code {r.op}")
        records.sort(key=lambda r: (r.order_clock, r.slot, r.seq))
        return records

    def _fit_clock(self) -> None:
        """Cycles per ns from the first and last anchor (%globaltimer anchors %clock64)."""
        recs = self.records
        self.clock0 = recs[0].clock if recs else 0
        self.ghz = DEFAULT_CLOCK_GHZ
        anchors = self.anchors
        self.globaltimer0 = None
        if len(anchors) >= 2:
            lo = min(anchors, key=lambda r: r.clock)
            hi = max(anchors, key=lambda r: r.clock)
            span_ns = hi.globaltimer - lo.globaltimer
            if span_ns >= 5000:
                self.ghz = (hi.clock - lo.clock) / span_ns
        if anchors:
            lo = min(anchors, key=lambda r: r.clock)
            self.globaltimer0 = int(lo.globaltimer - (lo.clock - self.clock0) / self.ghz)

    def ns(self, clock: int) -> int:
        return int(round((clock - self.clock0) / self.ghz))

    # ---------------------------------------------------------------------------- snapshots

    def snapshot(self, clock: int) -> dict:
        return {
            "step": len(self.steps),
            "status": self.status,
            "barriers": [{"name": n, **b.as_dict()}
                         for n, b in zip(self.barrier_names, self.replay.barriers, strict=True)],
            "stages": [
                {"name": n, "tile": self.stage_tile[s],
                 "chunks": [{"tile": t, "proxy": p, "fenced": f}
                            for t, p, f in self.chunk_state[s]]}
                for s, n in enumerate(self.stage_names)
            ],
            "agents": [self._agent_snapshot(a, clock) for a in self.agents.values()],
            "tma": [{"op": op["op"], "direction": op["direction"], "tile": op["tile"],
                     "stage": op["stage"], "chunk": op["chunk"], "chunks": self.chunks,
                     "barrier": op.get("barrier")}
                    for op in self._tma_in_flight()],
            "bulk_groups": [
                {"agent": a, "committed": self.committed.get(a, 0),
                 "pending_reads": len({s["group"] for s in self.stores
                                       if s["agent"] == a and s["group"] is not None})}
                for a in self.agents if "tma_store" in self.agents[a].lines
            ],
            "tensor_core": [],
        }

    def _tma_in_flight(self) -> list[dict]:
        loads = [op for op in self.loads.values() if op["chunk"] < self.chunks]
        return sorted(loads, key=lambda op: op["seq"]) + list(self.stores)

    def _agent_snapshot(self, agent: AgentState, clock: int) -> dict:
        waiting = agent.stuck
        if waiting is None and agent.waiting_from is not None and agent.waiting_from <= clock:
            waiting = agent.waiting_on
        done = agent.done
        return {
            "name": agent.name,
            "pc": agent.pc,
            "line": None if done else agent.pc,
            "iteration": agent.count,
            "registers": agent.registers(),
            "status": "done" if done else ("waiting" if waiting else "running"),
            "waiting_on": None if done else waiting,
        }

    # -------------------------------------------------------------------------------- steps

    def add_step(self, agent: str, op: str, line: int | None, operands: dict, events: list,
                 clock: int, diagnostics: list | None = None, observed: dict | None = None) -> dict:
        step_no = len(self.steps) + 1
        diagnostics = diagnostics or []
        for d in diagnostics:
            d["step"] = step_no
        step = {"step": step_no, "agent": agent, "op": op, "line": line, "operands": operands,
                "events": events, "diagnostics": diagnostics}
        self.steps.append(step)
        step["snapshot"] = self.snapshot(clock)
        step["time_ns"] = self.ns(clock)
        self.diagnostics.extend(diagnostics)
        if observed is not None:
            self.observed.append({"step": step_no, **observed})
        return step

    def barrier_events(self, kind: str, b: int, value: int, completed: bool) -> list[dict]:
        name = self.barrier_names[b]
        key = "count" if kind in ("init", "arrive") else "bytes"
        events = [{"kind": kind, "barrier": name, key: value}]
        if completed:
            barrier = self.replay.barriers[b]
            events.append({"kind": "phase_completed", "barrier": name, "phase": barrier.phase,
                           "parity": barrier.parity})
        return events

    @staticmethod
    def diag(kind: str, message: str, agents: list[str], barrier: str | None = None,
             stage: str | None = None, rule: str | None = None) -> dict:
        return {"kind": kind, "step": 0, "agents": agents, "barrier": barrier, "stage": stage,
                "rule": rule, "message": message}

    # ------------------------------------------------------------------------------ the ops

    def ops(self) -> list[Op]:
        """The replay's view of every record (barrier ops carry their observations)."""
        out = []
        for r in self.records:
            agent = self.agent_slots[r.slot]
            name = K.OP_NAMES[r.op]
            b = self.barrier_index.get(r.barrier)
            op = Op(agent=agent, kind="other", clock=r.order_clock, tile=r.tile, ref=r)
            if name == "init":
                op.kind, op.barrier, op.value = "init", b, r.a
            elif name in ("arrive", "arrive_expect_tx"):
                op.kind, op.barrier, op.value = name, b, r.a
                op.token_parity = (r.token >> 63) & 1
                op.token_pending = r.result
            elif name == "wait":
                op.kind, op.barrier, op.value = "wait", b, r.a
                op.wait_complete = bool(r.result)
                stages = self.stages if self.scenario != "single_barrier" else 1
                if b is not None and b >= len(self.stage_names) and self.scenario != \
                        "single_barrier":
                    op.needed_phase = r.tile // stages
                else:
                    op.needed_phase = r.tile // stages + 1
            elif name == "tma_load":
                op.kind, op.barrier, op.load = "tma_load", b, f"load:t{r.tile}"
                op.chunks, op.chunk_bytes = int(r.b), self.chunk_bytes
            elif name == "read":
                op.kind, op.load = "read", f"load:t{r.tile}"
                op.good_chunks = tuple(c for c in range(self.chunks) if not (r.token >> c) & 1)
            out.append(op)
        return out

    def decode(self) -> dict:
        """The whole trace document."""
        barriers = [Mbarrier() for _ in self.barrier_names]
        for barrier, count in zip(barriers, self.init_counts, strict=True):
            if count is not None:  # initialized at launch; the others by a logged init
                barrier.init(count)
        self.replay = Replay(barriers, self.barrier_names)
        initial = self.snapshot(self.clock0)
        self._plan_waits()
        last_clock = self.clock0
        for action in self.replay.run(self.ops()):
            if action.kind == "land":
                self._land(action, last_clock)
                continue
            record: Record = action.op.ref
            last_clock = max(last_clock, record.clock)
            self._handle(action, record)
        error = self.raw.get("error")
        timed_out = [a for a in self.agents.values() if a.stuck]
        if error:
            self.status = "hardware_trap"
            self._trap(error, last_clock)
        elif timed_out:
            self.status = "deadlock"
            self._deadlock(timed_out, last_clock)
        else:
            for action in self.replay.flush():
                self._land(action, last_clock, inferred_at_end=True)
            self.status = "done"
            if self.steps:
                self.steps[-1]["snapshot"]["status"] = "done"
        return self.document(initial)

    def _plan_waits(self) -> None:
        """For each record, the wait its agent starts next (so snapshots show who is waiting)."""
        self.next_wait: dict[int, tuple[int, dict] | None] = {}
        by_agent: dict[int, list[Record]] = {}
        for r in self.records:
            by_agent.setdefault(r.slot, []).append(r)
        self.first_wait: dict[str, tuple[int, dict] | None] = {}
        for slot, recs in by_agent.items():
            for i, r in enumerate(recs):
                nxt = recs[i + 1] if i + 1 < len(recs) else None
                self.next_wait[r.seq] = self._wait_of(nxt)
            self.first_wait[self.agent_slots[slot]] = self._wait_of(recs[0])
        for name, agent in self.agents.items():
            start = self.first_wait.get(name)
            if start:
                agent.waiting_from, agent.waiting_on = start

    def _wait_of(self, r: Record | None) -> tuple[int, dict] | None:
        if r is None or K.OP_NAMES[r.op] != "wait":
            return None
        b = self.barrier_index.get(r.barrier)
        return r.b, {"barrier": self.barrier_names[b], "parity": int(r.a)}

    # ---------------------------------------------------------------------- record handlers

    def _land(self, action: Action, clock: int, inferred_at_end: bool = False) -> None:
        load = self.loads[action.load]
        stage = load["stage_index"]
        self.chunk_state[stage][action.chunk] = [load["tile"], "async", False]
        load["chunk"] += 1
        self.figures["landings_inferred"] += 1
        events = [{"kind": "chunk_landed", "op": action.load, "stage": load["stage"],
                   "chunk": action.chunk, "tile": load["tile"]}]
        events += self.barrier_events("complete_tx", action.barrier, action.bytes,
                                      action.phase_completed)
        self.add_step("tma", OPS["land"], None,
                      {"op": action.load, "chunk": action.chunk, "stage": load["stage"],
                       "barrier": self.barrier_names[action.barrier]}, events, clock)

    def _advance_wait_plan(self, agent: AgentState, record: Record) -> None:
        nxt = self.next_wait.get(record.seq)
        agent.waiting_from, agent.waiting_on = nxt if nxt else (None, None)

    def _handle(self, action: Action, r: Record) -> None:
        agent = self.agents[self.agent_slots[r.slot]]
        name = K.OP_NAMES[r.op]
        self._advance_wait_plan(agent, r)
        handler = getattr(self, f"_on_{name}")
        handler(action, r, agent)
        if action.divergence:
            self.figures["divergences"] += 1
            step = self.steps[-1]
            d = self.diag("divergence", action.divergence, [agent.name],
                          barrier=self._bname(action.op.barrier))
            d["step"] = step["step"]
            step["diagnostics"].append(d)
            self.diagnostics.append(d)
        if action.reordered:
            self.figures["reordered"] += 1
        if action.undefined is not None:
            ub = action.undefined
            kind = ub.rule if ub.rule in ("over_arrival", "tx_overflow", "tx_underflow") \
                else "undefined_behavior"
            step = self.steps[-1]
            d = self.diag(kind, f"{agent.name}: {ub.message}: PTX leaves this undefined, and "
                                f"this GPU went on without trapping.", [agent.name],
                          barrier=self._bname(action.op.barrier), rule=ub.rule)
            d["step"] = step["step"]
            step["diagnostics"].append(d)
            self.diagnostics.append(d)

    def _bname(self, b: int | None) -> str | None:
        return None if b is None else self.barrier_names[b]

    def _obs(self, r: Record, **extra) -> dict:
        return {"agent": self.agent_slots[r.slot], "clock": r.clock, **extra}

    def _step_agent(self, agent: AgentState, kind: str, operands: dict, events: list,
                    clock: int, diagnostics: list | None = None,
                    observed: dict | None = None) -> dict:
        line = agent.lines[kind]
        agent.pc = line + 1
        return self.add_step(agent.name, OPS.get(kind, kind), line, operands, events, clock,
                             diagnostics, observed)

    def _advance(self, agent: AgentState, clock: int) -> None:
        """The bookkeeping line that ends an iteration (`++pipe_state`, `phase ^= 1`)."""
        if "advance" not in agent.lines:
            return
        agent.count += 1
        if agent.role == "thread":
            if "forget_phase_toggle" not in self.bugs:
                agent.phase ^= 1
            op = "i += 1" if "forget_phase_toggle" in self.bugs else "phase ^= 1"
        elif agent.role == "writer":
            agent.index = (agent.index + 1) % self.stages
            op = "index = (index + 1) % stages"
        else:
            agent.index += 1
            if agent.index == self.stages:
                agent.index = 0
                bug = ("forget_producer_phase_toggle" if agent.role == "producer"
                       else "forget_phase_toggle")
                if bug not in self.bugs:
                    agent.phase ^= 1
            op = "++pipe_state"
        operands = {"index": agent.index, "phase": agent.phase, "count": agent.count}
        if agent.role == "thread":
            operands = {"phase": agent.phase, "count": agent.count}
        line = agent.lines["advance"]
        agent.pc = agent.loop_start if agent.count < self.tiles else line + 1
        self.add_step(agent.name, op, line, operands,
                      [{"kind": "register", "agent": agent.name, "name": "pipe_state",
                        "value": dict(operands)}], clock)

    def _on_init(self, action: Action, r: Record, agent: AgentState) -> None:
        b = action.op.barrier
        self._step_agent(agent, "init", {"barrier": self.barrier_names[b], "count": int(r.a)},
                         self.barrier_events("init", b, int(r.a), False), r.clock,
                         observed=self._obs(r))

    def _on_arrive_expect_tx(self, action: Action, r: Record, agent: AgentState) -> None:
        b = action.op.barrier
        name = self.barrier_names[b]
        events = [{"kind": "expect_tx", "barrier": name, "bytes": int(r.a)},
                  *self.barrier_events("arrive", b, 1, action.phase_completed)]
        self._step_agent(agent, "arrive_expect_tx", {"barrier": name, "bytes": int(r.a)},
                         events, r.clock, observed=self._obs(r, **self._token(r)))

    def _token(self, r: Record) -> dict:
        return {"token": f"0x{r.token:016x}", "token_parity": (r.token >> 63) & 1,
                "token_pending": int(r.result)}

    def _on_arrive(self, action: Action, r: Record, agent: AgentState) -> None:
        b = action.op.barrier
        name = self.barrier_names[b]
        self.released[r.tile] = self.released.get(r.tile, 0) + 1
        self._step_agent(agent, "release", {"barrier": name, "count": int(r.a) or 1},
                         self.barrier_events("arrive", b, int(r.a) or 1, action.phase_completed),
                         r.clock, observed=self._obs(r, **self._token(r)))
        self._advance(agent, r.clock)

    def _on_tma_load(self, action: Action, r: Record, agent: AgentState) -> None:
        b = action.op.barrier
        stage = r.tile % len(self.stage_names)
        stage_name = self.stage_names[stage]
        load = f"load:t{r.tile}"
        diagnostics = []
        previous = r.tile - len(self.stage_names)
        if self.scenario == "double_buffer_tma" and previous >= 0:
            released = self.released.get(previous, 0)
            if released < self.consumers:
                holders = [f"consumer{c}" for c in range(self.consumers)]
                diagnostics.append(self.diag(
                    "overwrite",
                    f"{agent.name} issued the TMA load of tile {r.tile} into {stage_name} while "
                    f"tile {previous} was still in use: {released} of {self.consumers} consumer "
                    f"releases had been logged.",
                    ["tma", *holders[released:]], stage=stage_name))
        self.loads[load] = {"op": load, "direction": "load", "tile": r.tile, "stage": stage_name,
                            "stage_index": stage, "chunk": 0, "barrier": self.barrier_names[b],
                            "seq": r.seq}
        self.stage_tile[stage] = r.tile
        operands = {"op": load, "tile": r.tile, "stage": stage_name, "bytes": int(r.a),
                    "barrier": self.barrier_names[b], "chunks": int(r.b)}
        self._step_agent(agent, "tma_load", operands,
                         [{"kind": "tma_issued", "op": load, "direction": "load", "tile": r.tile,
                           "stage": stage_name, "bytes": int(r.a),
                           "barrier": self.barrier_names[b]}],
                         r.clock, diagnostics, observed=self._obs(r))
        if agent.role == "producer":
            self._advance(agent, r.clock)

    def _on_wait(self, action: Action, r: Record, agent: AgentState) -> None:
        b = action.op.barrier
        name = self.barrier_names[b]
        parity = int(r.a)
        kind = "wait_empty" if agent.role == "producer" else "wait_full"
        waited_ns = int(round((r.clock - r.b) / self.ghz))
        observed = self._obs(r, wait_complete=bool(r.result), tries=int(r.extra),
                             waited_ns=waited_ns)
        diagnostics = []
        if r.result:
            events = [{"kind": "wait_returned", "barrier": name, "parity": parity}]
            needed = action.op.needed_phase
            if action.phase_range and needed is not None and action.phase_range[1] < needed:
                self.figures["stale_waits"] += 1
                done = action.phase_range[1]
                what = (f"for tile {r.tile}" if kind == "wait_full"
                        else f"before loading tile {r.tile}")
                diagnostics.append(self.diag(
                    "stale_wait",
                    f"{agent.name}'s wait on {name} with parity {parity} {what} returned after "
                    f"{waited_ns} ns on an earlier use of the barrier: at most {done} "
                    f"phase{'s' if done != 1 else ''} can have completed, {needed} needed.",
                    [agent.name], barrier=name))
        else:
            self.figures["timeouts"] += 1
            agent.stuck = {"barrier": name, "parity": parity}
            events = [{"kind": "wait_timeout", "barrier": name, "parity": parity,
                       "waited_ns": waited_ns}]
        self._step_agent(agent, kind, {"barrier": name, "parity": parity}, events, r.clock,
                         diagnostics, observed)
        if not r.result:
            agent.pc = agent.lines[kind]

    def _on_read(self, action: Action, r: Record, agent: AgentState) -> None:
        stage = r.tile % len(self.stage_names)
        stage_name = self.stage_names[stage]
        words, bad = r.a & 0xFFFFFFFF, r.a >> 32
        stale, poison = r.b & 0xFFFFFFFF, r.b >> 32
        mask = r.token
        first_bad, first_value = r.result & 0xFFFFFFFF, r.result >> 32
        last_bad = int(r.extra)
        bad_chunks = [c for c in range(self.chunks) if (mask >> c) & 1]
        chunks_ok = self.chunks - len(bad_chunks)
        self.figures["tiles_read"] += 1
        observed = self._obs(r, words=int(words), bad_words=int(bad), stale_words=int(stale),
                             poison_words=int(poison), bad_chunks=bad_chunks)
        diagnostics = []
        if bad:
            self.figures["tiles_read_wrong"] += 1
            observed.update(first_bad_word=int(first_bad), first_bad_value=f"0x{first_value:08x}",
                            last_bad_word=last_bad - 1)
            diagnostics.append(self._read_diagnostic(agent, r, stage_name, int(words), int(bad),
                                                     int(stale), int(poison), bad_chunks,
                                                     int(first_bad), int(first_value),
                                                     last_bad - 1))
        self._step_agent(agent, "read", {"stage": stage_name, "tile": r.tile},
                         [{"kind": "smem_read", "stage": stage_name, "tile": r.tile,
                           "chunks_ok": chunks_ok, "chunks": self.chunks}],
                         r.clock, diagnostics, observed)
        if agent.role == "thread":
            self._advance(agent, r.clock)

    def _read_diagnostic(self, agent: AgentState, r: Record, stage: str, words: int, bad: int,
                         stale: int, poison: int, bad_chunks: list[int], first_bad: int,
                         first_value: int, last_bad: int) -> dict:
        chunk_words = self.chunk_bytes // 4
        spans = _spans(bad_chunks)
        where = ", ".join(
            f"chunk{'s' if b > a else ''} {a}{'-' + str(b) if b > a else ''} "
            f"(words {a * chunk_words}..{(b + 1) * chunk_words - 1})" for a, b in spans)
        if first_value == K.POISON:
            held = "had never been written (0xffffffff)"
        else:
            owner = (first_value >> 16) - r.cta * self.tiles
            when = "an earlier tile" if owner < r.tile else "a later tile: overwritten"
            held = (f"held tile {owner}'s word ({when})" if (first_value & 0xFFFF) == first_bad
                    else f"held 0x{first_value:08x}")
        parts = []
        if stale:
            parts.append(f"{stale} from another tile")
        if poison:
            parts.append(f"{poison} never written")
        mix = f" ({', '.join(parts)})" if parts else ""
        message = (f"{agent.name} read tile {r.tile} from {stage} and found {bad} of {words} "
                   f"words wrong{mix}, in {where}; word {first_bad} {held}.")
        kind = "partial_read" if bad < words else "stale_read"
        return self.diag(kind, message, [agent.name], stage=stage)

    def _on_tma_store(self, action: Action, r: Record, agent: AgentState) -> None:
        stage = int(r.b)
        stage_name = self.stage_names[stage]
        name = f"store:{agent.name}:t{r.tile}"
        group = self.committed.get(agent.name, 0)
        self.stores.append({"op": name, "direction": "store", "tile": r.tile, "stage": stage_name,
                            "stage_index": stage, "chunk": 0, "barrier": None, "agent": agent.name,
                            "group": None})
        observed = self._obs(r)
        dst = (self.raw.get("dst") or {}).get("tiles")
        if dst and r.tile < len(dst) and dst[r.tile][0]:
            bad, first, value, _ = dst[r.tile]
            observed.update(dst_bad_words=bad, dst_first_bad_word=first,
                            dst_first_bad_value=f"0x{value:08x}")
        self._step_agent(agent, "tma_store",
                         {"op": name, "tile": r.tile, "stage": stage_name, "bytes": int(r.a)},
                         [{"kind": "tma_issued", "op": name, "direction": "store", "tile": r.tile,
                           "stage": stage_name, "bytes": int(r.a), "barrier": None}],
                         r.clock, observed=observed)
        self.stores[-1]["group"] = group
        self.committed[agent.name] = group + 1
        self._step_agent(agent, "bulk_commit", {"group": group},
                         [{"kind": "bulk_commit", "agent": agent.name, "group": group}], r.clock)
        if agent.role == "writer":
            self._advance(agent, r.clock)

    def _drain_stores(self, agent: AgentState, allowed: int, clock: int) -> None:
        """Reconstruct the store reads a returned wait_group.read proves finished."""
        mine = [s for s in self.stores if s["agent"] == agent.name]
        groups = sorted({s["group"] for s in mine})
        for group in groups[:max(0, len(groups) - allowed)]:
            for store in [s for s in mine if s["group"] == group]:
                for c in range(self.chunks):
                    self._store_chunk(store, c, agent, clock)
                self.stores.remove(store)

    def _store_chunk(self, store: dict, c: int, agent: AgentState, clock: int) -> None:
        stage = store["stage_index"]
        tile, proxy, fenced = self.chunk_state[stage][c]
        store["chunk"] = c + 1
        diagnostics = []
        if proxy == "generic" and not fenced and c == 0:
            bad = self._dst_bad(store["tile"])
            seen = (f" On this run {bad} of its {self.words} words in global memory came out "
                    f"wrong." if bad else " On this run global memory still got the new words: "
                    "the race was not lost this time, and the fence is still required.")
            diagnostics.append(self.diag(
                "proxy_fence_missing",
                f"The TMA store of tile {store['tile']} (async proxy) read {store['stage']}, which "
                f"{agent.name} wrote with st.shared (generic proxy) and no fence.proxy.async: the "
                f"store may read the old bytes.{seen}",
                ["tma", agent.name], stage=store["stage"]))
        self.add_step("tma", OPS["stored"], None,
                      {"op": store["op"], "chunk": c, "stage": store["stage"]},
                      [{"kind": "chunk_stored", "op": store["op"], "stage": store["stage"],
                        "chunk": c, "tile": tile}], clock, diagnostics)

    def _dst_bad(self, tile: int) -> int:
        dst = (self.raw.get("dst") or {}).get("tiles")
        if dst and tile < len(dst):
            return int(dst[tile][0])
        return 0

    def _on_wait_group_read(self, action: Action, r: Record, agent: AgentState) -> None:
        allowed = int(r.a)
        self._drain_stores(agent, allowed, r.clock)
        pending = len({s["group"] for s in self.stores if s["agent"] == agent.name})
        self._step_agent(agent, "bulk_wait_read", {"pending": allowed},
                         [{"kind": "bulk_wait_returned", "agent": agent.name,
                           "pending": pending}], r.clock, observed=self._obs(r))
        if agent.role == "consumer" and "release" not in agent.lines:
            self._advance(agent, r.clock)

    def _on_wait_group(self, action: Action, r: Record, agent: AgentState) -> None:
        self._drain_stores(agent, 0, r.clock)
        self._step_agent(agent, "bulk_wait_all", {"pending": 0},
                         [{"kind": "bulk_wait_returned", "agent": agent.name, "pending": 0}],
                         r.clock, observed=self._obs(r))

    def _on_smem_write(self, action: Action, r: Record, agent: AgentState) -> None:
        stage = int(r.b)
        self.chunk_state[stage] = [[r.tile, "generic", False] for _ in range(self.chunks)]
        self.stage_tile[stage] = r.tile
        name = self.stage_names[stage]
        self._step_agent(agent, "write", {"stage": name, "tile": r.tile},
                         [{"kind": "smem_write", "stage": name, "tile": r.tile}], r.clock,
                         observed=self._obs(r))

    def _on_proxy_fence(self, action: Action, r: Record, agent: AgentState) -> None:
        stage = int(r.b)
        for chunks in self.chunk_state:
            for chunk in chunks:
                if chunk[1] == "generic":
                    chunk[2] = True
        self._step_agent(agent, "proxy_fence", {"stage": self.stage_names[stage]},
                         [{"kind": "proxy_fence", "stage": self.stage_names[stage]}], r.clock,
                         observed=self._obs(r))

    # ------------------------------------------------------------------------- the ending

    def _deadlock(self, timed_out: list[AgentState], clock: int) -> None:
        parts = []
        first = None
        for agent in timed_out:
            w = agent.stuck
            b = self.barrier_names.index(w["barrier"])
            barrier = self.replay.barriers[b]
            first = first or w["barrier"]
            parts.append(f"{agent.name} gave up waiting on {w['barrier']} parity {w['parity']} "
                         f"(the model has its parity at {barrier.parity}, "
                         f"{_count(barrier.pending_arrivals, 'arrival')} and "
                         f"{barrier.tx_count} bytes pending)")
        timeout = self.cfg.get("timeout_us")
        message = (f"Work remains and no agent can move: {'; '.join(parts)}. The kernel's "
                   f"bounded waits gave up after {timeout:g} us each, so it ended instead of "
                   f"hanging.")
        d = self.diag("deadlock", message, [a.name for a in timed_out], barrier=first)
        self._attach_final(d, clock)

    def _trap(self, error: dict, clock: int) -> None:
        why = self._predict_trap()
        ctas = int(self.cfg.get("ctas", 1))
        if not why and ctas > 1:
            why = (f" Nothing in CTA 0's log explains it: the trap may well have come from one "
                   f"of the other {ctas - 1} CTAs running the same code.")
        message = (f"The kernel trapped ({error.get('name')}: the CUDA context was lost) after "
                   f"the last logged event of CTA 0; events after it were never logged.{why}")
        d = self.diag("hardware_trap", message, list(self.agents), rule=error.get("name"))
        self._attach_final(d, clock, {"kind": "trap", "error": error.get("name")})

    def _predict_trap(self) -> str:
        """What the model says the producer's next operations would do (the likely trap).

        Records are logged after the operations they follow, so the operation that trapped is
        never in the log: walk the producer's program from its last logged line instead.
        """
        producer = self.agents.get("producer") or self.agents.get("thread")
        if producer is None or producer.done:
            return ""
        kind = producer.program[producer.pc][0]
        stage = producer.index if producer.role == "producer" else 0
        tile = producer.count
        if kind == "wait_empty":
            empty = self.replay.barriers[len(self.stage_names) + stage]
            if empty.parity == producer.phase:
                return ""
            kind = "arrive_expect_tx"
        if kind != "arrive_expect_tx":
            return ""
        barrier = self.replay.barriers[stage]
        name = self.barrier_names[stage]
        if barrier.pending_arrivals < 1:
            waits = "wait_empty" in producer.lines
            first = (f"its wait on empty_barrier[{stage}] passes at once, and " if waits
                     else "")
            return (f" The model points at {producer.name}'s next operation: {first}"
                    f"mbarrier.arrive.expect_tx on {name} for tile {tile} is a second arrive in "
                    f"one phase: {name} has no arrivals pending and {barrier.tx_count} bytes of "
                    f"the previous copy still in flight (over_arrival), which PTX leaves "
                    f"undefined and this GPU traps on.")
        return (f" {producer.name}'s next operation was mbarrier.arrive.expect_tx on {name} for "
                f"tile {tile}; the model has {_count(barrier.pending_arrivals, 'arrival')} "
                f"pending and {barrier.tx_count} bytes in flight there, so the trap most likely "
                f"came from bytes landing beyond what the phase expected.")

    def _attach_final(self, d: dict, clock: int, event: dict | None = None) -> None:
        if not self.steps:
            self.add_step("tma", "kernel ended", None, {}, [event] if event else [], clock, [d])
            return
        step = self.steps[-1]
        d["step"] = step["step"]
        step["diagnostics"].append(d)
        if event:
            step["events"].append(event)
        step["snapshot"]["status"] = self.status
        self.diagnostics.append(d)

    # ---------------------------------------------------------------------------- document

    def layout(self) -> dict:
        barriers = []
        for i, name in enumerate(self.barrier_names):
            role = "bar" if name == "bar" else name.split("_")[0]
            stage = None if name == "bar" else i % self.stages
            barriers.append({"name": name, "role": role, "stage": stage})
        roles = {"thread": "thread", "writer": "writer", "producer": "producer"}
        return {
            "barriers": barriers,
            "stages": [{"name": n, "chunks": self.chunks, "chunk_bytes": self.chunk_bytes}
                       for n in self.stage_names],
            "agents": [{"name": a.name, "role": roles.get(a.name, "consumer"),
                        "program": [text for _, text in a.program]}
                       for a in self.agents.values()],
        }

    def source(self) -> dict:
        raw = self.raw
        device = raw.get("device") or {}
        launch = raw.get("launch") or {}
        summary = raw.get("summary") or []
        ctas = {
            "launched": int(self.cfg.get("ctas", 1)),
            "logged": int(self.cfg.get("log_ctas", 1)),
            "shown": 0,
        }
        if summary and not raw.get("error"):
            ctas["timed_out"] = sum(1 for cta in summary if any(a[2] for a in cta))
            consumers = [a for cta in summary for a in cta[1:]] if len(summary[0]) > 1 \
                else [cta[0] for cta in summary]
            ctas["tiles_read"] = sum(a[0] for a in consumers)
            ctas["tiles_read_wrong"] = sum(a[1] for a in consumers)
            ctas["ctas_with_wrong_reads"] = sum(
                1 for cta in summary if any(a[1] for a in (cta[1:] if len(cta) > 1 else cta)))
        dst = raw.get("dst")
        if dst and self.scenario != "single_barrier":
            ctas["dst_tiles_wrong"] = dst.get("bad_tiles_all_ctas")
        first_ns = self.globaltimer0
        last_ns = (first_ns + self.ns(self.records[-1].clock)) if self.records and first_ns \
            else None
        return {
            "kind": "gpu",
            "engine": ENGINE,
            "device": device.get("device", "unknown"),
            "compute_capability": device.get("compute_capability"),
            "driver": device.get("driver", "unknown"),
            "cuda": device.get("cuda", "unknown"),
            "cupy": device.get("cupy"),
            "captured_at": raw.get("captured_at"),
            "kernel": launch.get("kernel"),
            "launch": {k: launch.get(k) for k in ("grid", "block", "smem_bytes",
                                                   "deadline_cycles")},
            "timeout_us": self.cfg.get("timeout_us"),
            "elapsed_ms": raw.get("elapsed_ms"),
            "error": raw.get("error"),
            "ctas": ctas,
            "clock_ghz": round(self.ghz, 4),
            "globaltimer_start_ns": first_ns,
            "logged_span_ns": (last_ns - first_ns) if first_ns is not None else None,
            "time_base": ("time_ns counts from the first logged event of CTA 0: %clock64 cycles "
                          "divided by clock_ghz, fitted to %globaltimer (32 ns ticks)."),
            "reconstructed": (
                "Observed on the GPU: every step by an agent (its order, time_ns and what it "
                "returned, listed in source.observed). Reconstructed by replaying the log through "
                "the barrier model: the barrier states in snapshots, the tma steps (a chunk "
                "landing "
                "is placed at the latest point the log allows: just before the first observation "
                "that needs it; a store's chunk reads just before the wait_group.read that proves "
                "them), stage contents and agents' waiting status."),
            "figures": dict(self.figures),
            "observed": self.observed,
        }

    def document(self, initial: dict) -> dict:
        params = {"stages": self.stages, "tiles": self.tiles, "tile_bytes": self.tile_bytes,
                  "chunk_bytes": self.chunk_bytes, "consumers": self.consumers}
        if self.scenario == "single_barrier":
            params.pop("consumers")
            params["stages"] = 1
        if self.scenario == "proxy_fence_store":
            params.pop("consumers")
        steps = self.steps
        for agent in self.agents.values():
            if agent.stuck:
                agent.waiting_from = None
        return {
            "format": FORMAT,
            "version": VERSION,
            "source": self.source(),
            "scenario": {"id": self.scenario, "params": params, "bugs": sorted(self.bugs),
                         "schedule": {"kind": "gpu"}},
            "layout": self.layout(),
            "initial": initial,
            "steps": steps,
            "window": {"from": 1, "to": len(steps)},
            "total_steps": len(steps),
            "status": self.status,
            "diagnostics": self.diagnostics,
        }


def _count(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def _spans(values: list[int]) -> list[tuple[int, int]]:
    """[1, 2, 3, 7] -> [(1, 3), (7, 7)]."""
    spans: list[tuple[int, int]] = []
    for v in values:
        if spans and spans[-1][1] == v - 1:
            spans[-1] = (spans[-1][0], v)
        else:
            spans.append((v, v))
    return spans


def decode(raw: dict) -> dict:
    """A raw GPU log (dict) to a trace document (docs/trace-format.md)."""
    return Decoder(raw).decode()
