"""What each logged observation says, checked against the engine (`app.replay.gpu_order`): an
arrive's token and pending count, a wait that returned, tested false or gave up, the chunks a
read found right, a `wait_group`. Each lands, first, the TMA chunks the observation needs
(step 3 of the replay, in `gpu_order`'s docstring), then moves the agent and compares.

`Observations` is one side of `GpuOrderReplay`, which inherits it (as it does `RunEnd`): these
methods use the replay's state (`m`, `run`, `checked`, `observations`, `gpu_status`) and its
moves (`step_agent`, `land`, `land_until`, `land_deferring`, `loads`, `family_move`,
`store_step`). `apply` dispatches a record of kind K to `_K`, when there is one."""

from __future__ import annotations

from app.sim.core import OP_AGENT, OP_DIR, OP_NEXT, OP_TILE, STORE

from .gpu_end import Divergence
from .gpu_log import GpuRecord, bits, read_words


class Observations:
    def wait_target(self, a: int):
        """(barrier, would_return) for the wait line agent `a` stands on."""
        m = self.m
        r = m.regs[a]
        pc = r[0]
        kind = m.code[a].kinds[pc]
        args = m.code[a].prepared[pc]
        b = args[1](r)
        if kind == "wait_parity":
            parity = args[2](r)
            return b, lambda: m.barriers[b].valid and (m.barriers[b].phase & 1) != parity
        token = args[2]
        return b, lambda: m.barriers[b].valid and m.barriers[b].phase > r[token]

    def observe(self, rec: GpuRecord, what: str, gpu, engine, ok: bool,
                step: int | None = None) -> None:
        """Record what the GPU saw beside what the engine says, at `step` (by default the step
        just made); a disagreement is a divergence."""
        self.checked += 1
        self.observations.append({"step": self.run.total_steps if step is None else step,
                                  "agent": rec.slot,
                                  "node": rec.node, "what": what, "gpu": gpu,
                                  "engine": engine, "agrees": ok})
        if not ok:
            raise Divergence(f"{self.m.agents[rec.slot].name} {what}: the GPU saw {gpu}, the "
                             f"engine {engine}")

    def _arrive(self, a: int, rec: GpuRecord) -> None:
        m = self.m
        if rec.detail & 1:  # through the cluster window: PTX returns no state to compare
            self.step_agent(a)
            return
        b, _, token, pending = rec.words[0], rec.words[1], rec.words[2], rec.words[3]
        parity = token >> 63
        barrier = m.barriers[b]
        # a token of a later phase: the copies that completed the earlier one have landed
        self.land_until(b, lambda: (barrier.phase & 1) == parity)
        self.arrive_async_until(b, parity, pending)
        seen = {"parity": parity, "pending": pending}
        model = {"parity": barrier.phase & 1, "pending": barrier.pending_arrivals}
        self.step_agent(a)
        self.observe(rec, f"arrived on {m.barrier_names[b]}", seen, model, seen == model)

    _arrive_drop = _arrive
    _arrive_expect_tx = _arrive

    def _setmaxnreg(self, a: int, rec: GpuRecord) -> None:
        """The warpgroup's new count is what the engine's line sets; an `.inc` that returned on
        the GPU found the registers in the CTA's pool, so the engine must let it move."""
        m = self.m
        word = "inc" if rec.detail else "dec"
        moves = m.agent_enabled(a)
        record = self.step_agent(a)
        registers = (record.get("operands") or {}).get("registers")
        self.observe(rec, f"setmaxnreg.{word} {rec.words[0]}",
                     {"registers": rec.words[0], "returned": True},
                     {"registers": registers, "returned": moves},
                     moves and registers == rec.words[0])

    def _wait(self, a: int, rec: GpuRecord) -> None:
        m = self.m
        ok, blocking = bool(rec.words[2]), bool(rec.words[4])
        b, returns = self.wait_target(a)
        bar = m.barrier_names[b]
        if ok:
            self.land_until(b, returns)
            self.observe(rec, f"waited on {bar}", "returned",
                         "returned" if returns() else "blocked", returns(),
                         step=self.run.total_steps + 1)
            self.step_agent(a)
            return
        if not blocking:
            self.observe(rec, f"tested {bar}", "not complete",
                         "complete" if returns() else "not complete", not returns(),
                         step=self.run.total_steps + 1)
            self.step_agent(a)
            return
        # a bounded wait gave up: everything in flight to this barrier has long landed
        self.land_deferring(b)
        self.observe(rec, f"waited on {bar} and gave up after {rec.words[3]} tries",
                     "timed out", "returns" if returns() else "blocked", not returns())
        self.gpu_status = "deadlock"

    _wait_parity = _wait
    _wait_token = _wait

    def _ld_shared(self, a: int, rec: GpuRecord) -> None:
        m = self.m
        stage, tile = rec.words[0], rec.words[1]
        ok_mask, stale, never = rec.words[2], rec.words[3], rec.words[4]
        chunks = m.program.stages[stage].chunks
        full = (1 << chunks) - 1
        if ok_mask == full:  # every word right: the copies into this stage have landed
            for _ in range(100_000):
                ks = self.loads(stage=stage, tile=tile)
                if ks:
                    self.land(ks[0])
                elif any(t != tile for t, _ in m.chunks[stage]) and self.family_move():
                    continue  # an asynchronous store into the stage landed first
                else:
                    break
        else:  # words of another tile: its copy into this stage landed over the chunks read
            foreign = full & ~ok_mask & ~stale & ~never
            top = max((c for c in range(chunks) if foreign >> c & 1), default=-1)
            for _ in range(100_000):
                ks = [k for k in self.loads(stage=stage) if m.tma[k][OP_TILE] != tile
                      and m.tma[k][OP_NEXT] <= top]
                if not ks:
                    break
                self.land(ks[0])
            # the chunks the read found right have landed, with their complete-tx: as many
            # (the engine lands a copy's chunks in order; silicon may not)
            right = bin(ok_mask).count("1")
            for _ in range(100_000):
                if sum(1 for t, _ in m.chunks[stage] if t == tile) >= right:
                    break
                ks = self.loads(stage=stage, tile=tile)
                if not ks:
                    break
                self.land(ks[0])
        held = m.chunks[stage]
        engine_ok = sum(1 << c for c, (t, _) in enumerate(held) if t == tile)
        gpu = read_words(ok_mask, stale, never, chunks, rec.detail)
        engine = "all chunks right" if engine_ok == full else (
            f"chunks {bits(engine_ok)} of {chunks} right")
        self.step_agent(a)
        self.observe(rec, f"read tile {tile} from {m.stage_names[stage]}", gpu, engine,
                     (ok_mask == full) == (engine_ok == full))

    def _wait_group(self, a: int, rec: GpuRecord) -> None:
        m = self.m
        for _ in range(100_000):
            if m.agent_enabled(a):
                break
            stores = [k for k, op in enumerate(m.tma)
                      if op[OP_DIR] == STORE and op[OP_AGENT] == a]
            if not stores:
                break
            self.store_step(stores[0])
        self.step_agent(a)

