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
NO_DEADLINE = ("setmaxnreg",)
"""Blocking line kinds the generated kernel issues with no deadline: a hang is their deadlock."""


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
        """A launch that never finished (`launch_hung`) where an agent that never reported
        its end stands, in the engine, at a blocking line the kernel gives no deadline
        (`setmaxnreg.inc` waits for the CTA's pool with no way to give up): a deadlock, the
        kernel's hang, once what is in flight has landed and the rest ran out their waits."""
        m = self.m
        ended = {r[1] for r in self.raw.get("records") or []
                 if r[0] == self.cta and (r[4] & 0xFF) == KIND_CODE["end"]}
        stuck = [a for a in range(m.n_agents) if a not in ended
                 and m.current_line(a) is not None
                 and m.code[a].kinds[m.regs[a][0]] in NO_DEADLINE]
        if not stuck:
            return False
        self.drain()
        if m.status not in (RUNNING, DEADLOCK) or any(m.agent_enabled(a)
                                                      for a in range(m.n_agents)):
            raise Divergence(f"the launch hung ({HUNG}) with "
                             f"{', '.join(m.agents[a].name for a in stuck)} at setmaxnreg; "
                             f"the engine can still move ({m.status})")
        self.gpu_status = "deadlock"
        names = ", ".join(m.agents[a].name for a in stuck)
        self.notes.append(f"the launch hung ({HUNG}): {names} never reported, and in the "
                          f"engine {'they wait' if len(stuck) > 1 else 'it waits'} at a line "
                          "the kernel gives no deadline (setmaxnreg.inc): a deadlock")
        return True

    def gpu_stored(self, dst_tile: int) -> int | None:
        """The engine id of the one tile whose words the GPU left in store destination
        `dst_tile` (CTA 0's `dst` report), or None when unknown or mixed."""
        dst = self.raw.get("dst") or {}
        program = self.m.program
        t, k = divmod(dst_tile, TILE_SPAN)
        name = program.tensors[t][0]
        if self.cta != 0 or name not in dst:
            return None
        found = dst[name]["cta0"][k]
        if len(found) != 1:
            return None
        number = found[0][0]
        tiles = self.raw["layout"]["tensor_tiles"]
        for u, (_, elements, _) in enumerate(program.tensors):
            if tiles[u] <= number < tiles[u] + elements:
                return u * TILE_SPAN + number - tiles[u]
        return None

    def store_step(self, k: int) -> None:
        """A bulk store reads its next chunk; where the GPU's destination shows the store read a
        tile still in flight in the engine, that tile's chunks land first."""
        m = self.m
        op = m.tma[k]
        if not op[OP_WRITING]:
            want = self.gpu_stored(op[OP_TILE])
            stage, chunk = op[OP_STAGE], op[OP_NEXT]
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
        against the tiles the engine's stores read out of shared memory."""
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
                chunks = self.stored.get(own)
                engine = ({tiles[x // TILE_SPAN] + x % TILE_SPAN if x >= 0 else -1
                           for x in chunks.values()} if chunks else {tiles[t] + k})
                gpu = {tile for tile, _ in dst[name]["cta0"][k]}
                self.checked += 1
                agrees = gpu == engine
                self.observations.append({
                    "step": self.run.total_steps, "agent": None, "node": None,
                    "what": f"{name}[{k}] in global memory", "gpu": sorted(gpu),
                    "engine": sorted(engine), "agrees": agrees})
                if not agrees and not flagged:
                    raise Divergence(f"{name}[{k}] holds words of tiles {sorted(gpu)} on the "
                                     f"GPU; the engine's stores wrote tiles {sorted(engine)}")
                if not agrees:
                    self.notes.append(f"{name}[{k}] holds tiles {sorted(gpu)}, not "
                                      f"{sorted(engine)}: a store read shared memory that "
                                      "threads wrote with no proxy fence (flagged)")

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
