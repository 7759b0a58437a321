"""One mbarrier driven op by op (docs/semantics.md, `POST /api/v1/mbarrier/run`): one state per op.

State tokens: an arrive may store the phase it arrived in under a name (`"token"`); `test_wait`
and `try_wait` with that name say whether that phase has completed, and `pending_count` reads the
arrivals that were pending *prior to* that arrive (PTX 9.7.13.15.17; an H200 agrees: init 3, two
`arrive.noComplete` tokens read 3, then 2). PTX defines `pending_count` only for the state of an
`arrive.noComplete` / `arrive_drop.noComplete` (`"no_complete": true`); on another token it is
undefined behaviour (rule `pending_count_token`), and a `.noComplete` arrive that completes the
phase is undefined behaviour too (rule `no_complete`). `mbarrier.pending_count` decodes the state
value alone, so only the waits check that a token is not stale.
"""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter
from fastapi.exceptions import RequestValidationError
from pydantic import BaseModel, ConfigDict, Field

from app.sim.barrier import COUNT_LIMIT, TX_LIMIT, Mbarrier, UndefinedBehavior

router = APIRouter(prefix="/mbarrier", tags=["mbarrier"])

MAX_OPS = 10_000

Count = Annotated[int, Field(ge=1, le=COUNT_LIMIT, strict=True)]
Bytes = Annotated[int, Field(ge=0, le=TX_LIMIT, strict=True)]
Parity = Annotated[int, Field(ge=0, le=1, strict=True)]
TokenName = Annotated[str, Field(min_length=1, max_length=40, strict=True)]


class _Op(BaseModel):
    model_config = ConfigDict(extra="forbid")


class InitOp(_Op):
    op: Literal["init"]
    count: Count = 1


class ArriveOp(_Op):
    op: Literal["arrive", "arrive_drop"]
    count: Count = 1
    token: TokenName | None = None
    no_complete: bool = Field(default=False, strict=True,
                              description="`.noComplete`: undefined if it completes the phase")


class BytesOp(_Op):
    op: Literal["expect_tx", "complete_tx"]
    bytes: Bytes


class ArriveExpectTxOp(_Op):
    op: Literal["arrive_expect_tx"]
    bytes: Bytes
    token: TokenName | None = None


class TokenWaitOp(_Op):
    op: Literal["test_wait", "try_wait"]
    token: TokenName


class PendingCountOp(_Op):
    op: Literal["pending_count"]
    token: TokenName


class WaitOp(_Op):
    op: Literal["test_wait_parity", "try_wait_parity"]
    parity: Parity


class InvalOp(_Op):
    op: Literal["inval"]


Op = Annotated[InitOp | ArriveOp | BytesOp | ArriveExpectTxOp | WaitOp | TokenWaitOp |
              PendingCountOp | InvalOp, Field(discriminator="op")]


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
    pending_count: int | None = Field(default=None, description="`pending_count` ops only")


class RunResponse(BaseModel):
    states: list[BarrierState]


def check_tokens(ops: list) -> None:
    """Every token a wait or `pending_count` names was stored by an earlier arrive (a 422 that
    names the op otherwise)."""
    stored: set[str] = set()
    for i, op in enumerate(ops):
        token = getattr(op, "token", None)
        if token is None:
            continue
        if op.op in ("test_wait", "try_wait", "pending_count"):
            if token not in stored:
                raise RequestValidationError([{
                    "loc": ("body", "ops", i, "token"), "type": "value_error", "input": token,
                    "msg": f"no earlier arrive stored a token named {token!r}"}])
        else:
            stored.add(token)


def run_ops(ops: list) -> list[dict]:
    """Apply `ops` to a fresh barrier; stop after the first undefined behaviour.

    Each op name is the `Mbarrier` method of the same name, its operand the method's argument;
    the token ops are answered from the phase (and pending count) an arrive recorded.
    """
    barrier = Mbarrier()
    tokens: dict[str, tuple[int, int, bool]] = {}
    states = []
    for op in ops:
        completed, wait, rule, extra = False, None, None, {}
        try:
            if op.op in ("test_wait", "try_wait"):
                wait = _token_wait(barrier, tokens[op.token])
            elif op.op == "pending_count":
                _, pending, no_complete = tokens[op.token]
                if not no_complete:
                    raise UndefinedBehavior("pending_count_token", "mbarrier.pending_count of a "
                                            "state that no arrive.noComplete returned")
                extra = {"pending_count": pending}
            else:
                operands = [getattr(op, name) for name in ("count", "bytes", "parity")
                            if hasattr(op, name)]
                phase, pending = barrier.phase, barrier.pending_arrivals
                no_complete = getattr(op, "no_complete", False)
                if (no_complete and barrier.valid and op.count == pending
                        and barrier.tx_count == 0):
                    raise UndefinedBehavior("no_complete", f"{op.op}.noComplete of {op.count} "
                                                           "would complete the phase")
                result = getattr(barrier, op.op)(*operands)
                if op.op.endswith("wait_parity"):
                    wait = result
                else:
                    completed = result
                if getattr(op, "token", None):
                    tokens[op.token] = (phase, pending, no_complete)
        except UndefinedBehavior as ub:
            rule = ub.rule
        states.append({"op": op.op, **barrier.as_dict(), "phase_completed": completed,
                       "wait_complete": wait, "undefined_behavior": rule, **extra})
        if rule:
            break
    return states


def _token_wait(barrier: Mbarrier, token: tuple[int, int, bool]) -> bool:
    """`test_wait`/`try_wait` with a state token: has the phase it names completed?"""
    barrier.test_wait_parity(0)  # an invalid barrier is `uninitialized`
    phase = token[0]
    if barrier.phase - phase >= 2:
        raise UndefinedBehavior("stale_token", f"a token of phase {phase} is "
                                               f"{barrier.phase - phase} phases old")
    return barrier.phase > phase


@router.post("/run", response_model=RunResponse, response_model_exclude_unset=True)
def post_run(request: RunRequest) -> dict:
    check_tokens(request.ops)
    return {"states": run_ops(request.ops)}
