"""How a GPU run ended, checked against the engine (`app.replay.gpu_order`): an agent's end, the
drain after the last record, a trap, timeouts, and what the bulk stores left in global memory.

`RunEnd` is one side of `GpuOrderReplay`, which inherits it: these methods use the replay's
state (`m`, `run`, `raw`, `cta`, `stored`, `observations`, `notes`) and its moves (`move`,
`land`, `loads`, `stop_if_ended`)."""

from __future__ import annotations

from app.capture.codegen import KIND_CODE
from app.sim.core import OP_DIR, OP_NEXT, OP_STAGE, OP_TILE, OP_WRITING, STORE, TILE_SPAN
from app.sim.machine import DEADLOCK, DONE, RUNNING, UNDEFINED, Machine, MoveError

from .gpu_log import GpuRecord

HUNG = "launch_hung"
"""A raw log's `error.name` when the launch never finished (app.capture.gen_runner.HUNG)."""
NO_DEADLINE = ("setmaxnreg", "bar_sync", "bar_red", "elect", "warp_sync")
"""Blocking line kinds the generated kernel issues with no deadline: a hang is their deadlock."""
COLLECTIVE = NO_DEADLINE[1:]
"""Of those, the ones logged only once they returned (app.replay.gpu_collective)."""


class Divergence(Exception):
    """Where the GPU and the engine part: `why` says how, in words."""

    def __init__(self, why: str):
        super().__init__(why)
        self.why = why


class RunEnd:
    def end_agent(self, a: int, rec: GpuRecord) -> None:
        m = self.m
        status = rec.detail
        if status != 0:
            return
        code = m.code[a]
        while m.regs[a][0] < code.end:
            pc = m.regs[a][0]
            if code.kinds[pc] != "assign":
                raise Divergence(f"{m.agents[a].name} finished on the GPU; the engine still "
                                 f"has node {pc} (`{code.nodes[pc].text}`) to run")
            self.move(a)

    def finish(self) -> None:
        """After the last record: a trap, timeouts or a clean end, each checked."""
        m = self.m
        error = self.raw.get("error")
        if error and error.get("name") == HUNG and self.hung_without_deadline():
            return
        if error:
            self.gpu_status = "hardware_trap"
            self.trap(error)
            return
        self.drain()
        self.check_stores()
        if self.gpu_status == "deadlock":
            if m.status == DONE:
                raise Divergence("agents timed out on the GPU; the engine finished the run")
            return
        if m.status != DONE:
            blocked = [m.agents[i].name for i in range(m.n_agents)
                       if m.current_line(i) is not None]
            raise Divergence(f"every agent finished on the GPU; in the engine "
                             f"{', '.join(blocked) or 'the run'} did not ({m.status})")

    def drain(self) -> None:
        """What is still in flight after the last record: loads land, stores finish, the
        families' asynchronous arrives and stores complete."""
        m = self.m
        for _ in range(1_000_000):
            if m.status != RUNNING:
                break
            if not m.tma:
                if not self.family_move():  # asynchronous arrives and stores still pending
                    break
                continue
            if m.tma[0][OP_DIR] == STORE:
                self.store_step(0)
            else:
                self.move(m.n_agents + 1)
            self.stop_if_ended()

    def hung_without_deadline(self) -> bool:
        """A launch that never finished (`launch_hung`) where agents that never reported their
        end stand, in the engine, at a blocking line the kernel gives no deadline
        (`setmaxnreg.inc` waits for the CTA's pool; a named barrier or a warp collective for
        its partners): a deadlock, the kernel's hang, once what is in flight has landed and the
        rest ran out their waits. A collective is logged only once it returned, so a thread
        that hangs in one has arrived unlogged: the engine makes that arrival, which must not
        complete it."""
        m = self.m
        ended = {r[1] for r in self.raw.get("records") or []
                 if r[0] == self.cta and (r[4] & 0xFF) == KIND_CODE["end"]}
        live = [a for a in range(m.n_agents) if a not in ended]
        for a in live:  # register-only lines are never logged
            while m.current_line(a) is not None and m.code[a].kinds[m.regs[a][0]] == "assign":
                self.move(a)
        stuck = [a for a in live if m.current_line(a) is not None
                 and m.code[a].kinds[m.regs[a][0]] in NO_DEADLINE]
        if not stuck:
            return False
        for a in stuck:
            kind = m.code[a].kinds[m.regs[a][0]]
            if kind in COLLECTIVE and m.agent_enabled(a) and not self.waits_in_engine(a):
                self.move(a)
                if not self.waits_in_engine(a):
                    raise Divergence(f"the launch hung ({HUNG}) with {m.agents[a].name} never "
                                     f"returning from `{kind}`; in the engine its arrival "
                                     "completes it")
        self.drain()
        lines = sorted({m.code[a].nodes[m.regs[a][0]].op.split()[0] for a in stuck})
        if m.status not in (RUNNING, DEADLOCK) or any(m.agent_enabled(a)
                                                      for a in range(m.n_agents)):
            raise Divergence(f"the launch hung ({HUNG}) with "
                             f"{', '.join(m.agents[a].name for a in stuck)} at "
                             f"{', '.join(lines)}; the engine can still move ({m.status})")
        self.gpu_status = "deadlock"
        names = ", ".join(m.agents[a].name for a in stuck)
        self.notes.append(f"the launch hung ({HUNG}): {names} never reported, and in the "
                          f"engine {'they wait' if len(stuck) > 1 else 'it waits'} at "
                          f"{'lines' if len(lines) > 1 else 'a line'} the kernel gives no "
                          f"deadline ({', '.join(lines)}): a deadlock")
        return True

    def gpu_found(self, dst_tile: int, chunk: int | None = None) -> list[int] | None:
        """The tile numbers whose words the GPU left in store destination `dst_tile` (CTA 0's
        `dst` report), most words first: in its chunk `chunk` where the report has chunks,
        else in the whole element; None when unknown."""
        dst = self.raw.get("dst") or {}
        t, k = divmod(dst_tile, TILE_SPAN)
        name = self.m.program.tensors[t][0]
        if self.cta != 0 or name not in dst:
            return None
        chunks = dst[name].get("cta0_chunks")
        if chunk is not None and chunks is not None:
            return [tile for tile, _ in chunks[k][chunk]] if chunk < len(chunks[k]) else None
        return [tile for tile, _ in dst[name]["cta0"][k]]

    def gpu_stored(self, dst_tile: int, chunk: int | None = None) -> int | None:
        """The engine id of the one tile whose words the GPU left in store destination
        `dst_tile` (its chunk `chunk`, where the report has chunks), or None when unknown or
        mixed."""
        found = self.gpu_found(dst_tile, chunk)
        if not found or len(found) != 1:
            return None
        program = self.m.program
        tiles = self.raw["layout"]["tensor_tiles"]
        for u, (_, elements, _) in enumerate(program.tensors):
            if tiles[u] <= found[0] < tiles[u] + elements:
                return u * TILE_SPAN + found[0] - tiles[u]
        return None

    def reads_before_landing(self, k: int) -> int:
        """Load `k` is about to land its next chunk in a stage that a store still reads: where
        the GPU's destination shows, chunk by chunk, that the store read the stage's current
        tile up to there, the store reads those chunks first. Returns the load's index then."""
        m = self.m
        op = m.tma[k]
        if op[OP_DIR] == STORE:
            return k
        stage, chunk = op[OP_STAGE], op[OP_NEXT]
        for _ in range(64):
            stores = [i for i, s in enumerate(m.tma) if s[OP_DIR] == STORE and not s[OP_WRITING]
                      and s[OP_STAGE] == stage and s[OP_NEXT] <= chunk]
            if not stores or m.n_agents + 1 + stores[0] not in m.ready:
                break
            store = m.tma[stores[0]]
            if self.chunk_report(store[OP_TILE]) is None or self.gpu_stored(
                    store[OP_TILE], store[OP_NEXT]) != m.chunks[stage][store[OP_NEXT]][0]:
                break
            self.move(m.n_agents + 1 + stores[0])
        return m.tma.index(op)

    def chunk_report(self, dst_tile: int) -> list | None:
        """CTA 0's per-chunk report of store destination `dst_tile`, if the raw log has one."""
        t, k = divmod(dst_tile, TILE_SPAN)
        found = ((self.raw.get("dst") or {}).get(self.m.program.tensors[t][0]) or {})
        return found["cta0_chunks"][k] if self.cta == 0 and "cta0_chunks" in found else None

    def store_step(self, k: int) -> None:
        """A bulk store reads its next chunk; where the GPU's destination shows the store read a
        tile still in flight in the engine there, that tile's chunks land first (a chunk at a
        time: a store reading a stage while the next load lands in it reads some chunks of
        each)."""
        m = self.m
        op = m.tma[k]
        if not op[OP_WRITING]:
            stage, chunk = op[OP_STAGE], op[OP_NEXT]
            want = self.gpu_stored(op[OP_TILE], chunk)
            for _ in range(100_000):
                if want is None or m.chunks[stage][chunk][0] == want:
                    break
                ks = [i for i in self.loads(stage=stage, tile=want)
                      if m.tma[i][OP_NEXT] <= chunk]
                if not ks:
                    break
                self.land(ks[0])
            k = m.tma.index(op)
        self.move(m.n_agents + 1 + k)

    def check_stores(self) -> None:
        """What the bulk stores left in global memory (the runner's `dst` report of CTA 0)
        against the tiles the engine's stores read out of shared memory: chunk by chunk where
        the report has chunks. A chunk holding words of two tiles is a copy that landed while
        the store read it, in pieces finer than the engine's chunks (32 bytes on the H200:
        traces/probes.json): it agrees when the engine's store read one of those tiles there."""
        dst = self.raw.get("dst") or {}
        if self.cta != 0 or not dst:
            return
        program = self.m.program
        tiles = self.raw["layout"]["tensor_tiles"]
        flagged = any(d["kind"] == "proxy_fence_missing" for d in self.run.diagnostics)
        for t, (name, elements, _) in enumerate(program.tensors):
            if name not in dst:
                continue
            for k in range(elements):
                own = t * TILE_SPAN + k
                chunks = self.stored.get(own) or {}
                number = {c: tiles[x // TILE_SPAN] + x % TILE_SPAN if x >= 0 else -1
                          for c, x in chunks.items()}
                per_chunk = dst[name].get("cta0_chunks")
                if per_chunk is not None and chunks:
                    self._check_chunks(name, k, per_chunk[k], number, flagged)
                    continue
                engine = set(number.values()) if chunks else {tiles[t] + k}
                gpu = {tile for tile, _ in dst[name]["cta0"][k]}
                self._stored_observation(f"{name}[{k}]", sorted(gpu), sorted(engine),
                                         gpu == engine, flagged)

    def _check_chunks(self, name: str, k: int, found: list, number: dict, flagged: bool) -> None:
        gpu = [sorted(tile for tile, _ in chunk) for chunk in found]
        engine = [number.get(c) for c in range(len(found))]
        mixed = [c for c, tiles in enumerate(gpu) if len(tiles) > 1]
        agrees = all(engine[c] in gpu[c] if c in mixed else gpu[c] == [engine[c]]
                     for c in range(len(gpu)))
        if agrees and mixed:
            self.notes.append(
                f"{name}[{k}] chunk{'s' if len(mixed) > 1 else ''} "
                f"{', '.join(map(str, mixed))} held words of tiles "
                f"{' and '.join(map(str, gpu[mixed[0]]))}: a copy landed in the stage while the "
                "store read it, in pieces finer than the engine's chunks (32 bytes on the H200, "
                "traces/probes.json); the engine's store read one of those tiles there")
        self._stored_observation(f"{name}[{k}] by chunk", gpu, engine, agrees, flagged)

    def _stored_observation(self, what: str, gpu, engine, agrees: bool, flagged: bool) -> None:
        self.checked += 1
        self.observations.append({
            "step": self.run.total_steps, "agent": None, "node": None,
            "what": f"{what} in global memory", "gpu": gpu, "engine": engine,
            "agrees": agrees})
        if not agrees and not flagged:
            raise Divergence(f"{what} holds words of tiles {gpu} on the GPU; the engine's "
                             f"stores wrote tiles {engine}" + (
                                 " (the engine lands a copy's chunks in order, so a store "
                                 "reading the stage under it sees the new tile from chunk 0 "
                                 "on; silicon lands them in any order)"
                                 if what.endswith("by chunk") else ""))
        if not agrees:
            self.notes.append(f"{what} holds tiles {gpu}, not {engine}: a store read shared "
                              "memory that threads wrote with no proxy fence (flagged)")

    def trap(self, error: dict) -> None:
        """The kernel trapped: the engine's next move by some agent must be undefined."""
        m = self.m
        for attempt in range(2):
            for a in range(m.n_agents):
                if not m.agent_enabled(a):
                    continue
                probe = Machine(self.cfg)
                probe.thaw(m.freeze(), m.step_no)
                try:
                    while probe.current_line(a) is not None and probe.code[a].kinds[
                            probe.regs[a][0]] == "assign":
                        probe.step(a)
                    record = probe.step(a)
                except MoveError:
                    continue
                if probe.status == UNDEFINED:
                    while m.code[a].kinds[m.regs[a][0]] == "assign":
                        self.move(a)
                    self.move(a)
                    kinds = [d["kind"] for d in record["diagnostics"]]
                    self.notes.append(f"the H200 trapped ({error.get('name')}); the engine's "
                                      f"next move by {m.agents[a].name} is "
                                      f"{', '.join(kinds)}")
                    return
            if attempt == 0:  # maybe the landings the trap overtook complete a phase first
                while m.status == RUNNING and self.loads():
                    self.land(self.loads()[0])
        grid = (self.raw.get("launch") or {}).get("grid", 1)
        if grid > 1:
            # A trap in any CTA ends them all: CTA 0's log is a consistent prefix of its run.
            self.notes.append(f"the H200 trapped ({error.get('name')}) with {grid} CTAs "
                              f"running; CTA {self.cta}'s next move is defined, so another CTA "
                              f"trapped: what CTA {self.cta} logged agrees with the engine up to "
                              "where it stopped")
            return
        raise Divergence(f"the kernel trapped ({error.get('name')}); no next move in the "
                         "engine is undefined behaviour")
