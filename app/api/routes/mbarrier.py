"""One mbarrier driven op by op (SEMANTICS.md, `POST /api/v1/mbarrier/run`): one state per op."""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter
from pydantic import BaseModel, ConfigDict, Field

from app.sim.barrier import COUNT_LIMIT, TX_LIMIT, Mbarrier, UndefinedBehavior

router = APIRouter(prefix="/mbarrier", tags=["mbarrier"])

MAX_OPS = 10_000

Count = Annotated[int, Field(ge=1, le=COUNT_LIMIT, strict=True)]
Bytes = Annotated[int, Field(ge=0, le=TX_LIMIT, strict=True)]
Parity = Annotated[int, Field(ge=0, le=1, strict=True)]


class _Op(BaseModel):
    model_config = ConfigDict(extra="forbid")


class InitOp(_Op):
    op: Literal["init"]
    count: Count = 1


class ArriveOp(_Op):
    op: Literal["arrive", "arrive_drop"]
    count: Count = 1


class BytesOp(_Op):
    op: Literal["expect_tx", "arrive_expect_tx", "complete_tx"]
    bytes: Bytes


class WaitOp(_Op):
    op: Literal["test_wait_parity", "try_wait_parity"]
    parity: Parity


class InvalOp(_Op):
    op: Literal["inval"]


Op = Annotated[InitOp | ArriveOp | BytesOp | WaitOp | InvalOp, Field(discriminator="op")]


class RunRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    ops: Annotated[list[Op], Field(max_length=MAX_OPS)]


class BarrierState(BaseModel):
    op: str
    phase: int
    parity: int
    pending_arrivals: int
    expected_arrivals: int
    tx_count: int
    valid: bool
    phase_completed: bool
    wait_complete: bool | None
    undefined_behavior: str | None


class RunResponse(BaseModel):
    states: list[BarrierState]


def run_ops(ops: list) -> list[dict]:
    """Apply `ops` to a fresh barrier; stop after the first undefined behaviour.

    Each op name is the `Mbarrier` method of the same name, its operand the method's argument.
    """
    barrier = Mbarrier()
    states = []
    for op in ops:
        operands = [getattr(op, name) for name in ("count", "bytes", "parity") if hasattr(op, name)]
        completed, wait, rule = False, None, None
        try:
            result = getattr(barrier, op.op)(*operands)
        except UndefinedBehavior as ub:
            rule = ub.rule
        else:
            if op.op.endswith("wait_parity"):
                wait = result
            else:
                completed = result
        states.append({"op": op.op, **barrier.as_dict(), "phase_completed": completed,
                       "wait_complete": wait, "undefined_behavior": rule})
        if rule:
            break
    return states


@router.post("/run", response_model=RunResponse)
def post_run(request: RunRequest) -> dict:
    return {"states": run_ops(request.ops)}
