"""`setmaxnreg.inc` / `setmaxnreg.dec` (PTX 9.7.19.5): a warpgroup gives registers back to the
CTA's pool or takes more from it, the way warp-specialized kernels (CUTLASS, FlashAttention-3)
move registers from the producer warpgroup to the consumers.

Every warp starts with the kernel's per-thread count (`registers N;`) and the pool empty. `.dec
N` releases what lies above N to the pool; `.inc N` blocks "until enough registers are available
in the CTA's register pool", then takes what N needs: a resource, so consumers that ask for more
than producers give back wait forever (a `deadlock`). Asking `.dec` for more than the warp holds,
or `.inc` for less, is undefined behaviour (`setmaxnreg_range`). The instruction is
warpgroup-wide: the language lets only an agent that stands for whole warpgroups (`warps 4`)
execute it.

The state is one hidden register per agent (its count, 0 for the launch count); the pool is
derived from all of them.
"""

from __future__ import annotations

from ..barrier import UndefinedBehavior
from ..family import Family
from ..isa import Form, Slot

COUNT = "%maxnreg"


def _held(m, x: int) -> int:
    return m.regs[x][m.hidden[COUNT]] or m.program.registers


def pool(m, cta: int) -> int:
    """Registers in the CTA's pool: what its warps released below the launch count."""
    launch = m.program.registers
    return sum((launch - _held(m, x)) * 32 * m.agents[x].warps for x in range(m.n_agents)
               if m.agent_cta[x] == cta and m.agents[x].lane == 0)


def _setmaxnreg(m, a, r, args, record) -> None:
    target, increase = args
    n = target(r)
    held = _held(m, a)
    name = m.agents[a].name
    word = "inc" if increase else "dec"
    if (increase and n < held) or (not increase and n > held):
        raise UndefinedBehavior("setmaxnreg_range", (
            f"{name}: setmaxnreg.{word} {n} with {held} registers per thread: PTX 9.7.19.5 "
            f"needs the current count {'at most' if increase else 'at least'} {n}"))
    r[m.hidden[COUNT]] = n
    record["operands"] = {"registers": n, "held": held}
    record["events"].append({"kind": "setmaxnreg", "agent": name, "registers": n,
                             "pool": pool(m, m.agent_cta[a])})


def _ready(m, a, r, args) -> bool:
    """`.inc` waits until the pool holds what it needs."""
    target, increase = args
    if not increase:
        return True
    need = (target(r) - _held(m, a)) * 32 * m.agents[a].warps
    return need <= pool(m, m.agent_cta[a])


def _waiting(m, a, r, args) -> dict:
    target, _ = args
    need = (target(r) - _held(m, a)) * 32 * m.agents[a].warps
    return {"registers": target(r), "needs": need, "pool": pool(m, m.agent_cta[a])}


def _explain(m, a, waiting) -> str:
    return (f"waits at setmaxnreg.inc {waiting['registers']} for {waiting['needs']} registers; "
            f"the CTA's pool holds {waiting['pool']}")


def _isa_forms() -> tuple:
    """This family's row of the instruction table (app/sim/isa.py), from the syntax block of
    PTX 9.1 section 9.7.19.5."""
    return (
        Form("setmaxnreg", "setmaxnreg", "imm-reg-count", "9.7.19.5",
             "`.inc` blocks until the CTA's pool holds the registers it asks for, then takes "
             "them; `.dec` gives what lies above the count back to the pool",
             (Slot("action", ("inc", "dec"), required=True),
              Slot("sync", ("sync",), default="sync", required=True, may_omit=True),
              Slot("aligned", ("aligned",), default="aligned", required=True, may_omit=True),
              Slot("type", ("u32",), default="u32", required=True, may_omit=True))),
    )


FAMILY = Family(
    "register reconfiguration (app/sim/families/setmaxnreg.py)", 70,
    {"setmaxnreg": _setmaxnreg}, {"setmaxnreg": _ready}, {"setmaxnreg": _waiting},
    explain={"setmaxnreg": _explain}, registers=(COUNT,), forms=_isa_forms(),
    writes_smem=frozenset())
