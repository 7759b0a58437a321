"""The whole pipeline machine: mbarriers, SMEM stage buffers, the TMA engine, the tensor core and
the agents, stepped one move at a time.

A *move* is one agent executing its current line, the TMA engine landing (or, for a store, reading)
one chunk of one in-flight bulk copy, or the tensor core retiring the oldest queued MMA or
`tcgen05.commit`. `moves()` numbers every possible mover in a fixed order and `enabled()` lists the
ones that can move now (an agent blocked in `try_wait.parity` or `wait_group.read` cannot), so a
schedule, the UI's student and the exhaustive checker all choose among the same moves. Detectors run
inside the move that causes a failure, so a diagnostic is pinned to its step. The machine is mutable
for speed; `freeze()` gives an immutable, hashable value of the whole state and `thaw()` rebuilds a
machine from it, which is what checkpoints and the checker keep.

Follows the PTX ISA sections on mbarrier, `cp.async.bulk`, `cp.async.bulk.commit_group` /
`wait_group`, `fence.proxy.async` and `tcgen05.commit`, and CUTLASS's `PipelineTmaAsync`.
"""

from __future__ import annotations

from .agents import AgentSpec, build_agents
from .barrier import Mbarrier, UndefinedBehavior
from .config import PipelineConfig

NO_TILE = -1

# Who wrote a chunk last: nobody, the async proxy (TMA), or threads (generic proxy), fenced or not.
W_NONE, W_ASYNC, W_GENERIC, W_GENERIC_FENCED = 0, 1, 2, 3
WRITER_NAMES = {W_NONE: None, W_ASYNC: "async", W_GENERIC: "generic", W_GENERIC_FENCED: "generic"}

# Agent registers, one list per agent: [pc, count, index, phase].
PC, COUNT, INDEX, PHASE = 0, 1, 2, 3

# A TMA operation in flight: [direction, tile, stage, barrier, next_chunk, agent, group, flagged].
LOAD, STORE = 0, 1
OP_DIR, OP_TILE, OP_STAGE, OP_BAR, OP_NEXT, OP_AGENT, OP_GROUP, OP_FLAGGED = range(8)

UB_KINDS = {"over_arrival", "tx_overflow", "tx_underflow"}
"""Undefined-behaviour rules that are diagnostics of their own; others: `undefined_behavior`."""

RUNNING, DONE, DEADLOCK, UNDEFINED = "running", "done", "deadlock", "undefined_behavior"


class MoveError(ValueError):
    """A move that cannot be made now (unknown mover, a blocked agent, a finished run)."""


class Diagnostic(dict):
    """A failure named at the step where it happened (trace format: DIAGNOSTIC)."""

    @classmethod
    def make(cls, kind: str, step: int, message: str, agents=(), barrier=None, stage=None,
             rule=None) -> Diagnostic:
        return cls(kind=kind, step=step, agents=list(agents), barrier=barrier, stage=stage,
                   rule=rule, message=message)


class Machine:
    """One pipeline, stepped by `step(move)`."""

    def __init__(self, cfg: PipelineConfig):
        self.cfg = cfg
        self.agents: tuple[AgentSpec, ...] = build_agents(cfg)
        self.n_agents = len(self.agents)
        self.kinds = tuple(tuple(i.kind for i in a.program) for a in self.agents)
        stages = 1 if cfg.pipeline == "single_barrier" else cfg.stages
        self.n_stages = stages
        self.n_chunks = cfg.chunks
        self.barrier_names = _barrier_names(cfg.pipeline, stages)
        self.stage_names = ["smem"] if cfg.pipeline == "single_barrier" else [
            f"smem[{s}]" for s in range(stages)
        ]
        self.consumer_mask = sum(a.consumer_bit for a in self.agents)
        self._handlers = {
            "init": self._op_init,
            "wait_full": self._op_wait_full,
            "wait_empty": self._op_wait_empty,
            "wait_accum": self._op_wait_accum,
            "arrive_expect_tx": self._op_arrive_expect_tx,
            "tma_load": self._op_tma_load,
            "read": self._op_read,
            "tma_store": self._op_tma_store,
            "bulk_commit": self._op_bulk_commit,
            "bulk_wait_read": self._op_bulk_wait,
            "bulk_wait_all": self._op_bulk_wait,
            "release": self._op_release,
            "advance": self._op_advance,
            "mma": self._op_mma,
            "mma_commit_empty": self._op_mma_commit,
            "mma_commit_accum": self._op_mma_commit,
            "nop": self._op_nop,
            "tmem_ld": self._op_tmem_ld,
            "st_global": self._op_nop,
            "write": self._op_write,
            "proxy_fence": self._op_proxy_fence,
        }
        self.reset()

    # ----------------------------------------------------------------------------------- state

    def reset(self) -> None:
        cfg = self.cfg
        self.barriers = [Mbarrier() for _ in self.barrier_names]
        if cfg.pipeline in ("tma_ring", "kloop_mma"):
            empty_count = 1 if (cfg.pipeline == "kloop_mma" or cfg.has("wrong_arrival_count")) \
                else cfg.consumers
            for s in range(self.n_stages):
                self.barriers[s].init(1)
                self.barriers[self.n_stages + s].init(empty_count)
            if cfg.pipeline == "kloop_mma":
                self.barriers[2 * self.n_stages].init(1)
        self.chunks = [[(NO_TILE, W_NONE)] * self.n_chunks for _ in range(self.n_stages)]
        self.stage_tile = [NO_TILE] * self.n_stages
        self.owed: dict[int, int] = {}
        self.regs = [[0, 0, 0, self._start_phase(a)] for a in self.agents]
        self.tma: list[list] = []
        self.bulk_committed = [0] * self.n_agents
        self.tensor_core: list[tuple] = []
        self.mma_done = 0
        self.status = RUNNING
        self.step_no = 0
        self._ready: list[int] | None = None

    def _start_phase(self, agent: AgentSpec) -> int:
        """`make_producer_start_state()`: the producer starts at phase 1, everyone else at 0."""
        return 1 if agent.role == "producer" else 0

    def freeze(self) -> tuple:
        """The whole state as nested tuples: immutable, hashable, canonical (no step number)."""
        return (
            tuple(b.freeze() for b in self.barriers),
            tuple(tuple(c) for c in self.chunks),
            tuple(self.stage_tile),
            tuple(sorted(self.owed.items())),
            tuple(tuple(r) for r in self.regs),
            tuple(tuple(op) for op in self.tma),
            tuple(self.bulk_committed),
            tuple(self.tensor_core),
            self.mma_done,
            self.status,
        )

    def thaw(self, frozen: tuple, step_no: int = 0) -> None:
        """Put the machine into a state `freeze()` returned."""
        (barriers, chunks, stage_tile, owed, regs, tma, bulk, tensor_core, mma_done,
         status) = frozen
        self.barriers = [Mbarrier.thaw(b) for b in barriers]
        self.chunks = [list(c) for c in chunks]
        self.stage_tile = list(stage_tile)
        self.owed = dict(owed)
        self.regs = [list(r) for r in regs]
        self.tma = [list(op) for op in tma]
        self.bulk_committed = list(bulk)
        self.tensor_core = list(tensor_core)
        self.mma_done = mma_done
        self.status = status
        self.step_no = step_no
        self._ready = None

    # ----------------------------------------------------------------------------------- moves

    def moves(self) -> list[str]:
        """Every mover that exists now, by number: agents, the tensor core, in-flight TMA ops."""
        names = [a.name for a in self.agents]
        names.append("tensor_core")
        names.extend(f"tma:{self.op_name(op)}" for op in self.tma)
        return names

    def op_name(self, op: list) -> str:
        if op[OP_DIR] == LOAD:
            return f"load:t{op[OP_TILE]}"
        return f"store:{self.agents[op[OP_AGENT]].name}:t{op[OP_TILE]}"

    @property
    def ready(self) -> list[int]:
        """The enabled moves now (`enabled()`, computed once per state)."""
        ready = self._ready
        if ready is None:
            ready = self._ready = self.enabled()
        return ready

    def enabled(self) -> list[int]:
        """The move numbers that can be made now, in move order."""
        if self.status != RUNNING:
            return []
        out = [a for a in range(self.n_agents) if self.agent_enabled(a)]
        base = self.n_agents
        if self.tensor_core:
            out.append(base)
        out.extend(range(base + 1, base + 1 + len(self.tma)))
        return out

    def agent_enabled(self, a: int) -> bool:
        regs = self.regs[a]
        kinds = self.kinds[a]
        pc = regs[PC]
        if pc >= len(kinds):
            return False
        kind = kinds[pc]
        if kind == "wait_full":
            barrier = self.barriers[regs[INDEX]]
            return not barrier.valid or (barrier.phase & 1) != regs[PHASE]
        if kind == "wait_empty":
            barrier = self.barriers[self.n_stages + regs[INDEX]]
            return not barrier.valid or (barrier.phase & 1) != regs[PHASE]
        if kind == "wait_accum":
            barrier = self.barriers[2 * self.n_stages]
            return not barrier.valid or (barrier.phase & 1) != 0
        if kind == "bulk_wait_read":
            # PTX: only the N most recent groups may still be pending; every older one is done.
            return all(op[OP_GROUP] >= self.bulk_committed[a] - self._bulk_wait_allowance(a)
                       for op in self.tma if op[OP_DIR] == STORE and op[OP_AGENT] == a)
        if kind == "bulk_wait_all":
            return self._pending_groups(a) == 0
        return True

    def resolve(self, mover: str) -> int:
        """A move number from a mover's name; `tma` alone means the oldest in-flight copy."""
        names = self.moves()
        if mover == "tma":
            if not self.tma:
                raise MoveError("the TMA engine has no copy in flight")
            return self.n_agents + 1
        if mover in names:
            return names.index(mover)
        raise MoveError(f"no mover named {mover!r}; movers now: {', '.join(names)}")

    def why_not(self, move: int) -> str:
        """Why a move number is not enabled now, in one phrase."""
        if self.status != RUNNING:
            return f"the run has ended ({self.status})"
        if move < self.n_agents:
            return self._blocked_reason(move)
        if move == self.n_agents:
            return "the tensor core has nothing queued"
        return "no such TMA copy in flight"

    def step(self, move: int) -> dict:
        """Make one move and return its step record (trace format: STEP, without snapshot)."""
        if self.status != RUNNING:
            raise MoveError(f"the run has ended ({self.status})")
        self.step_no += 1
        record = {"step": self.step_no, "agent": None, "op": None, "line": None,
                  "operands": {}, "events": [], "diagnostics": []}
        try:
            if move < self.n_agents:
                if not self.agent_enabled(move):
                    self.step_no -= 1
                    raise MoveError(self._blocked_reason(move))
                self._agent_step(move, record)
            elif move == self.n_agents:
                if not self.tensor_core:
                    self.step_no -= 1
                    raise MoveError("the tensor core has nothing queued")
                self._tensor_core_step(record)
            else:
                k = move - self.n_agents - 1
                if not 0 <= k < len(self.tma):
                    self.step_no -= 1
                    raise MoveError(f"no TMA copy number {k} in flight")
                self._tma_step(k, record)
        except UndefinedBehavior as ub:
            kind = ub.rule if ub.rule in UB_KINDS else "undefined_behavior"
            barrier = record["operands"].get("barrier")
            record["diagnostics"].append(Diagnostic.make(
                kind, self.step_no, f"{record['agent']}: {ub.message} (PTX leaves this undefined).",
                agents=[record["agent"]], barrier=barrier, rule=ub.rule,
            ))
            self.status = UNDEFINED
            self._ready = []
            return record
        self._settle(record)
        return record

    def _settle(self, record: dict | None) -> None:
        """Refresh `ready` after a move and end the run when it is done or deadlocked."""
        ready = self._ready = self.enabled()
        if ready:
            return
        if self._all_done():
            self.status = DONE
        elif self.status == RUNNING:
            self.status = DEADLOCK
            diagnostic = self._deadlock_diagnostic()
            if record is not None:
                record["diagnostics"].append(diagnostic)

    def _all_done(self) -> bool:
        if self.tma or self.tensor_core:
            return False
        return all(r[PC] >= len(a.program) for r, a in zip(self.regs, self.agents, strict=True))

    # ---------------------------------------------------------------------------- agent lines

    def _agent_step(self, a: int, record: dict) -> None:
        agent = self.agents[a]
        regs = self.regs[a]
        instr = agent.program[regs[PC]]
        record["agent"] = agent.name
        record["op"] = instr.op
        record["line"] = regs[PC]
        if self._handlers[instr.kind](a, regs, record):
            return
        regs[PC] += 1

    def _wait_barrier(self, a: int, kind: str) -> int:
        index = self.regs[a][INDEX]
        if kind == "wait_full":
            return index
        if kind == "wait_empty":
            return self.n_stages + index
        return 2 * self.n_stages

    def _wait_parity(self, a: int, kind: str) -> int:
        if kind == "wait_accum":
            return 0
        return self.regs[a][PHASE]

    def _pending_groups(self, a: int) -> int:
        committed = self.bulk_committed[a]
        groups = {op[OP_GROUP] for op in self.tma
                  if op[OP_DIR] == STORE and op[OP_AGENT] == a and op[OP_GROUP] < committed}
        return len(groups)

    def _bulk_wait_allowance(self, a: int) -> int:
        return self.n_stages - 1 if self.agents[a].role == "writer" else 0

    def _blocked_reason(self, a: int) -> str:
        agent = self.agents[a]
        regs = self.regs[a]
        if regs[PC] >= len(agent.program):
            return f"{agent.name} is done"
        kind = agent.program[regs[PC]].kind
        if kind.startswith("wait_"):
            b = self._wait_barrier(a, kind)
            return (f"{agent.name} is waiting on {self.barrier_names[b]} parity "
                    f"{self._wait_parity(a, kind)}")
        return f"{agent.name} is waiting for its bulk stores to finish reading shared memory"

    def waiting_on(self, a: int) -> dict | None:
        """What a blocked agent waits for (None if it can move or is done)."""
        agent = self.agents[a]
        regs = self.regs[a]
        if regs[PC] >= len(agent.program) or self.agent_enabled(a):
            return None
        kind = agent.program[regs[PC]].kind
        if kind.startswith("wait_"):
            b = self._wait_barrier(a, kind)
            return {"barrier": self.barrier_names[b], "parity": self._wait_parity(a, kind)}
        return {"bulk_groups": self._pending_groups(a),
                "allowed": 0 if kind == "bulk_wait_all" else self._bulk_wait_allowance(a)}

    def _barrier_op(self, record: dict, b: int, kind: str, method, value: int) -> None:
        """Run one barrier operation, recording it and the phase completion it may cause."""
        name = self.barrier_names[b]
        barrier = self.barriers[b]
        events = record["events"]
        if method(value):
            events.append({"kind": kind, "barrier": name, **_operand(kind, value)})
            events.append({"kind": "phase_completed", "barrier": name, "phase": barrier.phase,
                           "parity": barrier.phase & 1})
        else:
            events.append({"kind": kind, "barrier": name, **_operand(kind, value)})

    def _op_init(self, a, regs, record) -> None:
        record["operands"] = {"barrier": self.barrier_names[0], "count": 1}
        self._barrier_op(record, 0, "init", self.barriers[0].init, 1)

    def _op_wait(self, a, regs, record, kind: str, needed: int, tile_word: str) -> None:
        b = self._wait_barrier(a, kind)
        parity = self._wait_parity(a, kind)
        name = self.barrier_names[b]
        record["operands"] = {"barrier": name, "parity": parity}
        barrier = self.barriers[b]
        barrier.try_wait_parity(parity)
        record["events"].append({"kind": "wait_returned", "barrier": name, "parity": parity})
        if barrier.phase < needed:
            agent = self.agents[a].name
            record["diagnostics"].append(Diagnostic.make(
                "stale_wait", self.step_no,
                f"{agent}'s wait on {name} with parity {parity} {tile_word} returned at once: "
                f"the barrier's current parity is {barrier.phase & 1} from an earlier use "
                f"({barrier.phase} phase{'s' if barrier.phase != 1 else ''} completed, "
                f"{needed} needed).",
                agents=[agent], barrier=name,
            ))

    def _phases_needed(self, a: int) -> int | None:
        """Completed phases the barrier an agent waits on must show for the wait to be right.

        This is the ground truth the parity only approximates: tile i's use of a full barrier is
        its (i / S + 1)-th completion; the producer's wait for tile i needs i / S completions of
        the empty barrier (none for the first S tiles); the epilogue needs one.
        """
        regs = self.regs[a]
        program = self.agents[a].program
        if regs[PC] >= len(program):
            return None
        kind = program[regs[PC]].kind
        if kind == "wait_full":
            return regs[COUNT] // self.n_stages + 1
        if kind == "wait_empty":
            return regs[COUNT] // self.n_stages
        if kind == "wait_accum":
            return 1
        return None

    def _op_wait_full(self, a, regs, record) -> None:
        self._op_wait(a, regs, record, "wait_full", self._phases_needed(a),
                      f"for tile {regs[COUNT]}")

    def _op_wait_empty(self, a, regs, record) -> None:
        self._op_wait(a, regs, record, "wait_empty", self._phases_needed(a),
                      f"before loading tile {regs[COUNT]} into smem[{regs[INDEX]}]")

    def _op_wait_accum(self, a, regs, record) -> None:
        self._op_wait(a, regs, record, "wait_accum", 1, "for the accumulator")

    def _op_arrive_expect_tx(self, a, regs, record) -> None:
        b = regs[INDEX]
        cfg = self.cfg
        nbytes = cfg.tile_bytes
        if cfg.has("expect_tx_short"):
            nbytes -= cfg.chunk_bytes
        elif cfg.has("expect_tx_long"):
            nbytes += cfg.chunk_bytes
        record["operands"] = {"barrier": self.barrier_names[b], "bytes": nbytes}
        barrier = self.barriers[b]
        barrier._require_valid("mbarrier.arrive.expect_tx")
        if barrier.pending_arrivals < 1:
            raise UndefinedBehavior(
                "over_arrival",
                f"mbarrier.arrive.expect_tx on {self.barrier_names[b]} with no arrivals pending "
                "(a second arrive in one phase)",
            )
        self._barrier_op(record, b, "expect_tx", barrier.expect_tx, nbytes)
        self._barrier_op(record, b, "arrive", barrier.arrive, 1)

    def _op_tma_load(self, a, regs, record) -> None:
        tile, stage = regs[COUNT], regs[INDEX]
        b = stage
        self.tma.append([LOAD, tile, stage, b, 0, a, 0, False])
        self.stage_tile[stage] = tile
        self.owed[tile] = self.consumer_mask
        name = f"load:t{tile}"
        record["operands"] = {"op": name, "tile": tile, "stage": self.stage_names[stage],
                              "bytes": self.cfg.tile_bytes, "barrier": self.barrier_names[b]}
        record["events"].append({"kind": "tma_issued", "op": name, "direction": "load",
                                 "tile": tile, "stage": self.stage_names[stage],
                                 "bytes": self.cfg.tile_bytes, "barrier": self.barrier_names[b]})

    def _check_read(self, agents: list[str], stage: int, tile: int, record: dict,
                    reader: str) -> None:
        chunks = self.chunks[stage]
        ok = sum(1 for t, _ in chunks if t == tile)
        n = self.n_chunks
        stage_name = self.stage_names[stage]
        record["events"].append({"kind": "smem_read", "stage": stage_name, "tile": tile,
                                 "chunks_ok": ok, "chunks": n})
        if ok == n:
            return
        others = sorted({t for t, _ in chunks if t != tile})
        if ok > 0 or others == [NO_TILE]:
            old = [f"tile {t}" for t in others if t != NO_TILE]
            rest = f"; the other chunks still hold {', '.join(old)}" if old else ""
            message = (f"{reader} read tile {tile} from {stage_name} with only {ok} of its {n} "
                       f"chunks landed ({(n - ok) * self.cfg.chunk_bytes} bytes missing{rest}).")
            record["diagnostics"].append(Diagnostic.make(
                "partial_read", self.step_no, message, agents=agents, stage=stage_name))
            return
        held = ", ".join(f"tile {t}" for t in others if t != NO_TILE)
        when = "an earlier" if all(t < tile for t in others) else "another"
        record["diagnostics"].append(Diagnostic.make(
            "stale_read", self.step_no,
            f"{reader} read tile {tile} from {stage_name} but the buffer still holds {when} "
            f"tile's data ({held}).",
            agents=agents, stage=stage_name))

    def _op_read(self, a, regs, record) -> None:
        agent = self.agents[a]
        tile, stage = regs[COUNT], regs[INDEX]
        record["operands"] = {"stage": self.stage_names[stage], "tile": tile}
        self._check_read([agent.name], stage, tile, record, agent.name)
        if agent.role == "thread":
            self._release_tile(tile, agent.consumer_bit)

    def _release_tile(self, tile: int, bit: int) -> None:
        owed = self.owed.get(tile)
        if owed is not None:
            owed &= ~bit
            if owed:
                self.owed[tile] = owed
            else:
                del self.owed[tile]

    def _op_tma_store(self, a, regs, record) -> None:
        tile, stage = regs[COUNT], regs[INDEX]
        self.tma.append([STORE, tile, stage, -1, 0, a, self.bulk_committed[a], False])
        name = f"store:{self.agents[a].name}:t{tile}"
        record["operands"] = {"op": name, "tile": tile, "stage": self.stage_names[stage],
                              "bytes": self.cfg.tile_bytes}
        record["events"].append({"kind": "tma_issued", "op": name, "direction": "store",
                                 "tile": tile, "stage": self.stage_names[stage],
                                 "bytes": self.cfg.tile_bytes, "barrier": None})

    def _op_bulk_commit(self, a, regs, record) -> None:
        group = self.bulk_committed[a]
        self.bulk_committed[a] = group + 1
        record["operands"] = {"group": group}
        record["events"].append({"kind": "bulk_commit", "agent": self.agents[a].name,
                                 "group": group})

    def _op_bulk_wait(self, a, regs, record) -> None:
        kind = self.agents[a].program[regs[PC]].kind
        allowed = 0 if kind == "bulk_wait_all" else self._bulk_wait_allowance(a)
        record["operands"] = {"pending": allowed}
        record["events"].append({"kind": "bulk_wait_returned", "agent": self.agents[a].name,
                                 "pending": self._pending_groups(a)})

    def _op_release(self, a, regs, record) -> None:
        b = self.n_stages + regs[INDEX]
        record["operands"] = {"barrier": self.barrier_names[b], "count": 1}
        self._release_tile(regs[COUNT], self.agents[a].consumer_bit)
        self._barrier_op(record, b, "arrive", self.barriers[b].arrive, 1)

    def _op_advance(self, a, regs, record) -> bool:
        agent = self.agents[a]
        cfg = self.cfg
        regs[COUNT] += 1
        if agent.role == "thread":
            if not cfg.has("forget_phase_toggle"):
                regs[PHASE] ^= 1
        else:
            regs[INDEX] += 1
            if regs[INDEX] == self.n_stages:
                regs[INDEX] = 0
                forget = cfg.has("forget_producer_phase_toggle" if agent.role == "producer"
                                 else "forget_phase_toggle")
                if agent.role != "writer" and not forget:
                    regs[PHASE] ^= 1
        record["operands"] = {"index": regs[INDEX], "phase": regs[PHASE], "count": regs[COUNT]}
        if agent.role == "thread":
            record["operands"] = {"phase": regs[PHASE], "i": regs[COUNT]}
        record["events"].append({"kind": "register", "agent": agent.name,
                                 "name": "phase" if agent.role == "thread" else "pipe_state",
                                 "value": dict(record["operands"])})
        if regs[COUNT] < cfg.tiles:
            regs[PC] = agent.loop_start
            return True
        return False

    def _op_mma(self, a, regs, record) -> None:
        tile, stage = regs[COUNT], regs[INDEX]
        self.tensor_core.append(("mma", stage, tile, -1))
        name = f"mma:k{tile}"
        record["operands"] = {"op": name, "stage": self.stage_names[stage], "tile": tile}
        record["events"].append({"kind": "mma_issued", "op": name,
                                 "stage": self.stage_names[stage], "tile": tile})

    def _op_mma_commit(self, a, regs, record) -> None:
        kind = self.agents[a].program[regs[PC]].kind
        if kind == "mma_commit_empty":
            b, tile = self.n_stages + regs[INDEX], regs[COUNT]
        else:
            b, tile = 2 * self.n_stages, NO_TILE
        self.tensor_core.append(("commit", NO_TILE, tile, b))
        record["operands"] = {"barrier": self.barrier_names[b]}

    def _op_nop(self, a, regs, record) -> None:
        return None

    def _op_tmem_ld(self, a, regs, record) -> None:
        record["operands"] = {"mma_done": self.mma_done, "mma_needed": self.cfg.tiles}
        record["events"].append({"kind": "tmem_read", "mma_done": self.mma_done,
                                 "mma_needed": self.cfg.tiles})
        if self.mma_done < self.cfg.tiles:
            name = self.agents[a].name
            record["diagnostics"].append(Diagnostic.make(
                "partial_read", self.step_no,
                f"{name} read the accumulator after only {self.mma_done} of {self.cfg.tiles} "
                "MMAs had finished.", agents=[name]))

    def _op_write(self, a, regs, record) -> None:
        tile, stage = regs[COUNT], regs[INDEX]
        self.chunks[stage] = [(tile, W_GENERIC)] * self.n_chunks
        self.stage_tile[stage] = tile
        record["operands"] = {"stage": self.stage_names[stage], "tile": tile}
        record["events"].append({"kind": "smem_write", "stage": self.stage_names[stage],
                                 "tile": tile})

    def _op_proxy_fence(self, a, regs, record) -> None:
        for s, chunks in enumerate(self.chunks):
            if any(w == W_GENERIC for _, w in chunks):
                self.chunks[s] = [(t, W_GENERIC_FENCED if w == W_GENERIC else w)
                                  for t, w in chunks]
        record["events"].append({"kind": "proxy_fence", "stage": self.stage_names[regs[INDEX]]})

    # ------------------------------------------------------------------------- async engines

    def _tma_step(self, k: int, record: dict) -> None:
        op = self.tma[k]
        stage, c = op[OP_STAGE], op[OP_NEXT]
        name = self.op_name(op)
        stage_name = self.stage_names[stage]
        record["agent"] = "tma"
        record["operands"] = {"op": name, "chunk": c, "stage": stage_name}
        if op[OP_DIR] == LOAD:
            self._land_chunk(op, name, record)
        else:
            self._store_chunk(op, name, record)
        op[OP_NEXT] = c + 1
        if c + 1 == self.n_chunks:
            del self.tma[k]

    def _land_chunk(self, op: list, name: str, record: dict) -> None:
        stage, tile, c = op[OP_STAGE], op[OP_TILE], op[OP_NEXT]
        stage_name = self.stage_names[stage]
        old_tile = self.chunks[stage][c][0]
        record["op"] = "cp.async.bulk (chunk lands)"
        if old_tile != tile and old_tile in self.owed and not op[OP_FLAGGED]:
            op[OP_FLAGGED] = True
            holders = [a.name for a in self.agents if a.consumer_bit & self.owed[old_tile]]
            record["diagnostics"].append(Diagnostic.make(
                "overwrite", self.step_no,
                f"The TMA load of tile {tile} wrote {stage_name} while tile {old_tile} was still "
                f"in use: {', '.join(holders)} had not released it.",
                agents=["tma", *holders], stage=stage_name))
        self.chunks[stage][c] = (tile, W_ASYNC)
        record["events"].append({"kind": "chunk_landed", "op": name, "stage": stage_name,
                                 "chunk": c, "tile": tile})
        b = op[OP_BAR]
        record["operands"]["barrier"] = self.barrier_names[b]
        self._barrier_op(record, b, "complete_tx", self.barriers[b].complete_tx,
                         self.cfg.chunk_bytes)

    def _store_chunk(self, op: list, name: str, record: dict) -> None:
        stage, tile, c = op[OP_STAGE], op[OP_TILE], op[OP_NEXT]
        stage_name = self.stage_names[stage]
        record["op"] = "cp.async.bulk (chunk stored)"
        written_by = self.chunks[stage][c][1]
        if written_by == W_GENERIC and not op[OP_FLAGGED]:
            op[OP_FLAGGED] = True
            agent = self.agents[op[OP_AGENT]].name
            record["diagnostics"].append(Diagnostic.make(
                "proxy_fence_missing", self.step_no,
                f"The TMA store of tile {tile} (async proxy) read {stage_name}, which {agent} "
                "wrote with st.shared (generic proxy) and no fence.proxy.async: the store may "
                "read the old bytes.",
                agents=["tma", agent], stage=stage_name))
        record["events"].append({"kind": "chunk_stored", "op": name, "stage": stage_name,
                                 "chunk": c, "tile": self.chunks[stage][c][0]})

    def _tensor_core_step(self, record: dict) -> None:
        kind, stage, tile, b = self.tensor_core.pop(0)
        record["agent"] = "tensor_core"
        if kind == "mma":
            name = f"mma:k{tile}"
            record["op"] = "tcgen05.mma (executes)"
            record["operands"] = {"op": name, "stage": self.stage_names[stage], "tile": tile}
            self._check_read(["tensor_core", "mma"], stage, tile, record, "the tensor core")
            self.mma_done += 1
            record["events"].append({"kind": "mma_done", "op": name,
                                     "stage": self.stage_names[stage], "tile": tile})
            return
        name = self.barrier_names[b]
        record["op"] = "tcgen05.commit (arrives)"
        record["operands"] = {"barrier": name}
        record["events"].append({"kind": "mma_commit", "barrier": name})
        if tile != NO_TILE:
            self._release_tile(tile, 1)
        self._barrier_op(record, b, "arrive", self.barriers[b].arrive, 1)

    # --------------------------------------------------------------------------- diagnostics

    def _deadlock_diagnostic(self) -> Diagnostic:
        blocked = []
        names = []
        first_barrier = None
        for a, agent in enumerate(self.agents):
            waiting = self.waiting_on(a)
            if waiting is None:
                continue
            names.append(agent.name)
            if "barrier" in waiting:
                b = self.barrier_names.index(waiting["barrier"])
                barrier = self.barriers[b]
                first_barrier = first_barrier or waiting["barrier"]
                why = (f"its parity is {barrier.phase & 1}, {barrier.pending_arrivals} arrivals "
                       f"and {barrier.tx_count} bytes pending")
                needed = self._phases_needed(a)
                if needed is not None and barrier.phase >= needed:
                    why += (f"; the completion it needs already happened ({barrier.phase} phases "
                            f"completed, {needed} needed), so parity {waiting['parity']} now "
                            "names the current, unfinished phase")
                blocked.append(f"{agent.name} waits on {waiting['barrier']} parity "
                               f"{waiting['parity']} ({why})")
            else:
                blocked.append(f"{agent.name} waits for its bulk stores")
        return Diagnostic.make(
            "deadlock", self.step_no,
            "Work remains and no agent can move: " + "; ".join(blocked) + ".",
            agents=names, barrier=first_barrier)

    # ------------------------------------------------------------------------------ snapshots

    def snapshot(self) -> dict:
        """The full state as trace format's SNAPSHOT."""
        return {
            "step": self.step_no,
            "status": self.status,
            "barriers": [{"name": name, **b.as_dict()}
                         for name, b in zip(self.barrier_names, self.barriers, strict=True)],
            "stages": [
                {"name": self.stage_names[s],
                 "tile": None if self.stage_tile[s] == NO_TILE else self.stage_tile[s],
                 "chunks": [{"tile": None if t == NO_TILE else t, "proxy": WRITER_NAMES[w],
                             "fenced": w == W_GENERIC_FENCED} for t, w in self.chunks[s]]}
                for s in range(self.n_stages)
            ],
            "agents": [self._agent_snapshot(a) for a in range(self.n_agents)],
            "tma": [{"op": self.op_name(op), "direction": "load" if op[OP_DIR] == LOAD else "store",
                     "tile": op[OP_TILE], "stage": self.stage_names[op[OP_STAGE]],
                     "chunk": op[OP_NEXT], "chunks": self.n_chunks,
                     "barrier": self.barrier_names[op[OP_BAR]] if op[OP_DIR] == LOAD else None}
                    for op in self.tma],
            "bulk_groups": [{"agent": self.agents[a].name, "committed": self.bulk_committed[a],
                             "pending_reads": self._pending_groups(a)}
                            for a in range(self.n_agents)
                            if any(i.kind == "tma_store" for i in self.agents[a].program)],
            "tensor_core": [
                {"op": f"mma:k{tile}" if kind == "mma" else "commit", "kind": kind,
                 "stage": self.stage_names[stage] if kind == "mma" else None,
                 "tile": None if tile == NO_TILE else tile,
                 "barrier": self.barrier_names[b] if kind == "commit" else None}
                for kind, stage, tile, b in self.tensor_core
            ],
        }

    def _agent_snapshot(self, a: int) -> dict:
        agent = self.agents[a]
        pc, count, index, phase = self.regs[a]
        done = pc >= len(agent.program)
        waiting = None if done else self.waiting_on(a)
        registers = {"phase": phase} if agent.role == "thread" else (
            {"index": index, "count": count} if agent.role in ("writer", "epilogue")
            else {"index": index, "phase": phase, "count": count})
        return {
            "name": agent.name,
            "pc": pc,
            "line": None if done else pc,
            "iteration": count,
            "registers": registers,
            "status": "done" if done else ("waiting" if waiting else "running"),
            "waiting_on": waiting,
        }

    def layout(self) -> dict:
        """What never changes during the run (trace format: layout)."""
        roles = {"full": "full", "empty": "empty", "accum": "accum"}
        barriers = []
        for name in self.barrier_names:
            role = next((r for prefix, r in roles.items() if name.startswith(prefix)), "bar")
            stage = int(name[name.index("[") + 1:-1]) if "[" in name else None
            barriers.append({"name": name, "role": role, "stage": stage})
        return {
            "barriers": barriers,
            "stages": [{"name": n, "chunks": self.n_chunks, "chunk_bytes": self.cfg.chunk_bytes}
                       for n in self.stage_names],
            "agents": [{"name": a.name, "role": a.role, "program": [i.text for i in a.program]}
                       for a in self.agents],
        }


def _operand(kind: str, value: int) -> dict:
    return {"count": value} if kind in ("init", "arrive") else {"bytes": value}


def _barrier_names(pipeline: str, stages: int) -> list[str]:
    if pipeline == "single_barrier":
        return ["bar"]
    if pipeline == "proxy_store":
        return []
    names = [f"full_barrier[{s}]" for s in range(stages)]
    names += [f"empty_barrier[{s}]" for s in range(stages)]
    if pipeline == "kloop_mma":
        names.append("accum_full_barrier")
    return names
