"""Conformance: does a captured GPU trace agree with the barrier model, operation by operation?

A GPU trace keeps, beside each step by an agent, what the hardware returned (`source.observed`):
the token of every arrive (parity and pending arrivals of the phase it arrived on) and the result of
every bounded `try_wait.parity`. `check_trace` replays the trace's barrier operations in order
through the simulator's `Mbarrier`, starting from the trace's initial barrier states, and confirms
each observation is one the model predicts. It does so twice:

- *inferred*: ignoring the trace's own `tma` steps and landing in-flight chunks only when an
  observation needs them (`app.replay.model`): are the observations explainable at all?
- *as recorded*: applying the trace's `tma` landing steps exactly where they stand, landing nothing
  else: is the trace as written self-consistent? A doctored trace, say a wait moved before the bytes
  it waited for, fails here even when some other landing order would explain it.

Every disagreement is a `divergence` diagnostic naming the step, the agent and the barrier.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from app.replay.model import Op, Replay
from app.sim.barrier import Mbarrier

LAND_OPS = ("cp.async.bulk (chunk lands)",)
LOAD_OP = "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes"


@dataclass
class Report:
    """What conformance found: the divergences (as diagnostics) and what was checked."""

    checked: int = 0
    divergences: list[dict] = field(default_factory=list)
    recorded_divergences: list[dict] = field(default_factory=list)
    reordered: int = 0
    undefined: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.divergences and not self.recorded_divergences

    def summary(self) -> dict:
        return {
            "observations_checked": self.checked,
            "divergences": len(self.divergences),
            "recorded_order_divergences": len(self.recorded_divergences),
            "concurrent_arrives_reordered": self.reordered,
            "model_undefined_behavior": self.undefined,
            "passes": self.ok,
        }


def _barrier_from(state: dict) -> Mbarrier:
    return Mbarrier.thaw((int(state["phase"]), int(state["pending_arrivals"]),
                          int(state["expected_arrivals"]), int(state["tx_count"]),
                          bool(state["valid"])))


def trace_ops(doc: dict, recorded: bool) -> list[Op]:
    """The trace's barrier operations as replay ops, observations attached (step number in ref)."""
    names = [b["name"] for b in doc["initial"]["barriers"]]
    index = {n: i for i, n in enumerate(names)}
    observed = {o["step"]: o for o in doc.get("source", {}).get("observed", [])}
    stage_chunk_bytes = {s["name"]: int(s["chunk_bytes"]) for s in doc["layout"]["stages"]}
    stage_chunks = {s["name"]: int(s["chunks"]) for s in doc["layout"]["stages"]}
    ops = []
    for step in doc["steps"]:
        op_name = step["op"]
        operands = step.get("operands") or {}
        obs = observed.get(step["step"], {})
        b = index.get(operands.get("barrier"))
        op = Op(agent=step["agent"], kind="other", barrier=None, clock=int(obs.get("clock", 0)),
                ref=step["step"])
        if op_name == "mbarrier.init":
            op.kind, op.barrier, op.value = "init", b, int(operands.get("count", 1))
        elif op_name in ("mbarrier.arrive.expect_tx", "mbarrier.arrive"):
            op.kind = "arrive_expect_tx" if op_name.endswith("expect_tx") else "arrive"
            op.barrier = b
            op.value = int(operands.get("bytes", 0)) if op.kind == "arrive_expect_tx" \
                else int(operands.get("count", 1))
            if "token_parity" in obs:
                op.token_parity = int(obs["token_parity"])
                op.token_pending = int(obs["token_pending"])
        elif op_name in ("mbarrier.try_wait.parity", "mbarrier.test_wait.parity"):
            op.kind, op.barrier, op.value = "wait", b, int(operands.get("parity", 0))
            if "wait_complete" in obs:
                op.wait_complete = bool(obs["wait_complete"])
        elif op_name == LOAD_OP:
            stage = operands.get("stage")
            op.kind, op.barrier, op.load = "tma_load", b, operands.get("op")
            op.chunks = int(operands.get("chunks", stage_chunks.get(stage, 1)))
            op.chunk_bytes = stage_chunk_bytes.get(stage, 0)
        elif op_name in LAND_OPS:
            if not recorded:
                continue
            stage = operands.get("stage")
            op.kind, op.barrier, op.value = "complete_tx", b, stage_chunk_bytes.get(stage, 0)
        elif op_name == "ld.shared" and obs:
            tile = operands.get("tile")
            stage = operands.get("stage")
            bad = set(obs.get("bad_chunks", []))
            op.kind, op.load = "read", f"load:t{tile}"
            op.good_chunks = tuple(c for c in range(stage_chunks.get(stage, 0)) if c not in bad)
        else:
            continue
        ops.append(op)
    return ops


def _replay(doc: dict, recorded: bool) -> tuple[list[dict], int, int, list[str]]:
    names = [b["name"] for b in doc["initial"]["barriers"]]
    barriers = [_barrier_from(b) for b in doc["initial"]["barriers"]]
    replay = Replay(barriers, names, infer_landings=not recorded)
    divergences, checked, reordered, undefined = [], 0, 0, []
    for action in replay.run(trace_ops(doc, recorded)):
        if action.kind != "op":
            continue
        op = action.op
        if op.token_parity is not None or op.wait_complete is not None:
            checked += 1
        if action.reordered:
            reordered += 1
        if action.undefined is not None:
            undefined.append(f"step {op.ref}: {action.undefined.rule}")
        if action.divergence:
            how = "as recorded" if recorded else "with inferred landings"
            divergences.append({
                "kind": "divergence", "step": op.ref, "agents": [op.agent],
                "barrier": names[op.barrier] if op.barrier is not None else None,
                "stage": None, "rule": None,
                "message": f"{action.divergence} (replayed {how})",
            })
    return divergences, checked, reordered, undefined


def check_trace(doc: dict) -> Report:
    """Replay a trace's logged barrier operations through the model; see the module docstring."""
    report = Report()
    if doc.get("source", {}).get("kind") != "gpu":
        return report
    report.divergences, report.checked, report.reordered, report.undefined = _replay(doc, False)
    report.recorded_divergences = _replay(doc, True)[0]
    return report
