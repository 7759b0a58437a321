"""From a pipeline text to the program the engine runs.

The pipeline is compiled in layers that import one way (each only from those above it):

- `loader`: the text, its parameters and bug toggles (`load`, `resolve_params`,
  `check_requires`);
- `declarations`: the cluster, barriers, stages, tensors and tensor memory, folded over the
  parameter values;
- `agents`: each agent's body (registers, statements, loops, helper calls), one instance per
  element of an agent array and per CTA;
- `instructions`: one instruction statement to one engine `Line`: a new instruction's lowering
  is its row in its family's `FAMILY.forms` (app/sim/families) and its operand reader in
  `instructions.READERS`;
- this module: `instantiate`, which puts them together, and the public names.

Errors carry the line and column.
"""

from __future__ import annotations

from dataclasses import replace
from functools import lru_cache

from app.sim.program import Program

from .agents import AgentBuilder
from .declarations import (
    ArrayDecl,
    cluster_constants,
    cluster_shape,
    cta_constants,
    declarations,
)
from .errors import ParamError, PipelineError
from .expansion import substitute
from .exprs import Scope, constant
from .limits import (
    MAX_AGENTS,
    MAX_BARRIERS,
    MAX_CHUNKS,
    MAX_CLUSTER,
    MAX_CTA_THREADS,
    MAX_ELEMENTS,
    MAX_HELPER_DEPTH,
    MAX_LINES,
    MAX_NODES,
    MAX_REGISTERS,
    MAX_SOURCE_BYTES,
    MAX_STAGES,
    PARAM_LIMIT,
)
from .loader import (
    BUILTIN_CONSTANTS,
    Pipeline,
    check_requires,
    element_variant,
    load,
    resolve_params,
    sha256,
)
from .syntax import Agent, Helper, Index, Registers


@lru_cache(maxsize=256)
def instantiate(pipeline: Pipeline, values: tuple[tuple[str, int], ...]) -> Program:
    """The engine program for these parameter values (`resolve_params` checked them)."""
    shape = cluster_shape(pipeline, dict(values))
    ctas = shape[0] * shape[1]
    constants = {**dict(values), **cluster_constants(shape)}
    arrays, barriers, stages, tensors, tmems = declarations(pipeline, constants, ctas)
    kinds = {name: decl.kind for name, decl in arrays.items()}
    user_helpers = {h.name: h for h in pipeline.module.items if isinstance(h, Helper)}
    _check_reserved(pipeline)
    agents = []
    named: dict[str, tuple[Agent, int | None]] = {}
    for cta in range(ctas):
        for item in pipeline.module.items:
            if not isinstance(item, Agent):
                continue
            count = 1 if item.dim is None else constant(item.dim, Scope(constants, kinds),
                                                         "an agent array's size")
            if count < 1 or len(agents) + count > MAX_AGENTS:
                raise PipelineError(f"a pipeline has 1 to {MAX_AGENTS} agents; `{item.name}` "
                                    f"makes it {len(agents) + count}", item.pos.line,
                                    item.pos.column, limit="agents")
            warps, lanes = _shape(item, Scope(constants, kinds))
            if len(agents) + count * lanes > MAX_AGENTS:
                raise PipelineError(f"a pipeline has 1 to {MAX_AGENTS} agents (each lane is "
                                    f"one); `{item.name}` makes it {len(agents) + count * lanes}",
                                    item.pos.line, item.pos.column, limit="agents")
            for rank in range(count):
                name = item.name if item.dim is None else f"{item.name}{rank}"
                if cta == 0:
                    _check_unique(pipeline, named, name, item, None if item.dim is None else rank)
                if ctas > 1:
                    name = f"cta{cta}.{name}"
                here = {**constants, **cta_constants(shape, cta), "rank": rank,
                        "%warps": warps}
                text, agent = pipeline.text, item
                variant = element_variant(pipeline, item.name, count, rank, Scope(here, kinds))
                if variant is not None:
                    text, agent = variant
                warp = len(agents)
                for lane in range(lanes):
                    mine = {**here, "%laneid": lane} if lanes > 1 else here
                    builder = AgentBuilder(text, arrays, mine, user_helpers)
                    program = builder.build(f"{name}.lane{lane}" if lanes > 1 else name, agent)
                    agents.append(replace(_with_deleted(program, item, pipeline), warps=warps,
                                          lanes=lanes, lane=lane, warp=warp))
            threads = sum(a.warps * (32 if a.lane == 0 else 0) for a in agents if a.cta == cta)
            if threads > MAX_CTA_THREADS:
                raise PipelineError(f"a CTA has at most {MAX_CTA_THREADS} threads "
                                    f"({MAX_CTA_THREADS // 32} warps); `{item.name}` makes it "
                                    f"{threads}", item.pos.line, item.pos.column,
                                    limit="agents")
    if not agents:
        raise PipelineError("a pipeline needs at least one `agent { ... }`",
                            len(pipeline.text.splitlines()) or 1, 1)
    registers = _launch_registers(pipeline, Scope(constants, kinds))
    _check_setmaxnreg(agents, registers)
    return Program(tuple(barriers), tuple(stages), tuple(tensors), tuple(tmems), tuple(agents),
                   ctas, registers)


RESERVED_AGENT_NAMES = {
    "tma": "the TMA engine (`moves=tma` moves its oldest copy in flight)",
    "tensor_core": "the tensor core (it runs the queued `tcgen05.mma` / `wgmma` work)",
}
"""Movers' names that are not agents: a schedule (`moves=`, a session's step) names movers,
so an agent with one of these names would be two movers at once."""


def _name_at(pipeline: Pipeline, item: Agent) -> tuple[int, int]:
    """The line and column of an agent's name (after `agent`)."""
    start = pipeline.text.find(item.name, item.pos.start)
    if start < 0:
        return item.pos.line, item.pos.column
    line_start = pipeline.text.rfind("\n", 0, start) + 1
    return pipeline.text.count("\n", 0, start) + 1, start - line_start + 1


def _check_reserved(pipeline: Pipeline) -> None:
    """No agent takes a reserved mover's name (`RESERVED_AGENT_NAMES`)."""
    for item in pipeline.module.items:
        if isinstance(item, Agent) and item.name in RESERVED_AGENT_NAMES:
            words = " and ".join(f"`{w}`" for w in sorted(RESERVED_AGENT_NAMES))
            raise PipelineError(f"`{item.name}` is a reserved name: it names "
                                f"{RESERVED_AGENT_NAMES[item.name]}, so no agent may take it",
                                *_name_at(pipeline, item),
                                hint=f"{words} are reserved for the movers that are not agents; "
                                     f"rename the agent, e.g. `{item.name}_warp`")


def _check_unique(pipeline: Pipeline, named: dict, name: str, item: Agent,
                  rank: int | None) -> None:
    """Each agent (each element of an agent array) has its own name."""
    if name not in named:
        named[name] = (item, rank)
        return
    first, first_rank = named[name]

    def what(agent: Agent, k: int | None) -> str:
        return f"agent `{agent.name}`" if k is None else f"element {k} of agent `{agent.name}[...]`"

    line, column = _name_at(pipeline, item)
    hint = "a schedule names the movers, so two agents cannot share a name"
    if rank is None and first_rank is None:
        raise PipelineError(f"agent `{name}` is declared twice (first on line {first.pos.line})",
                            line, column, hint=hint)
    raise PipelineError(f"{what(item, rank)} is named `{name}`, as {what(first, first_rank)} on "
                        f"line {first.pos.line} is: each agent needs its own name", line, column,
                        hint=hint)


def _with_deleted(program, item: Agent, pipeline: Pipeline):
    """`program` with the deleted lines of its agent's body, each placed before the first
    listed line below it."""
    low = item.pos.line
    high = pipeline.text.count("\n", 0, item.pos.end) + 1
    lines = [program.nodes[n].source_line for n in program.listing]
    deleted = []
    for line, original, comment in pipeline.deleted:
        if low <= line <= high:
            before = next((i for i, at in enumerate(lines) if at > line), len(lines))
            deleted.append((before, line, original, comment))
    return replace(program, deleted=tuple(deleted)) if deleted else program


def _launch_registers(pipeline: Pipeline, scope: Scope) -> int | None:
    decls = [d for d in pipeline.module.items if isinstance(d, Registers)]
    if not decls:
        return None
    if len(decls) > 1:
        raise PipelineError("`registers` is declared twice", decls[1].pos.line,
                            decls[1].pos.column)
    value = constant(decls[0].value, scope, "the registers a thread is launched with")
    if not 24 <= value <= 256:
        raise PipelineError(f"`registers {value}`: a thread has 24 to 256 registers",
                            decls[0].pos.line, decls[0].pos.column)
    return value


def _check_setmaxnreg(agents, registers: int | None) -> None:
    """`setmaxnreg` moves a warpgroup's registers (PTX 9.7.19.5: "the same setmaxnreg
    instruction must be executed by all warps in a warpgroup"): here, by an agent that stands
    for whole warpgroups, in a kernel whose launch count is declared."""
    for agent in agents:
        for node in agent.nodes:
            if getattr(node, "kind", None) != "setmaxnreg":
                continue
            if agent.warps % 4:
                raise PipelineError(f"`{node.op}` is executed by a whole warpgroup: declare "
                                    f"`agent {agent.role} warps 4` (PTX 9.7.19.5)",
                                    node.source_line, 1)
            if registers is None:
                raise PipelineError(f"`{node.op}` needs the registers every thread is "
                                    "launched with: declare `registers N;` (the kernel's "
                                    "maximum, PTX 9.7.19.5)", node.source_line, 1)


def _shape(item: Agent, scope: Scope) -> tuple[int, int]:
    """An agent's `warps N` (warps in lockstep, 1 by default) and `lanes N` (movers of its one
    warp, 1 by default), checked."""
    warps = 1 if item.warps is None else constant(item.warps, scope, "an agent's `warps`")
    lanes = 1 if item.lanes is None else constant(item.lanes, scope, "an agent's `lanes`")
    pos = item.pos
    if not 1 <= warps <= MAX_CTA_THREADS // 32:
        raise PipelineError(f"`warps {warps}`: an agent stands for 1 to {MAX_CTA_THREADS // 32} "
                            "warps", pos.line, pos.column)
    if not 1 <= lanes <= 32:
        raise PipelineError(f"`lanes {lanes}`: a warp has 32 lanes; model 1 to 32 of them",
                            pos.line, pos.column)
    if lanes > 1 and warps > 1:
        raise PipelineError("`lanes` splits one warp into movers; it does not go with `warps`",
                            pos.line, pos.column,
                            hint="declare the lanes of one warp (`agent producer lanes 4`)")
    return warps, lanes


__all__ = ["Pipeline", "load", "instantiate", "resolve_params", "check_requires", "sha256",
           "cluster_shape", "ArrayDecl", "AgentBuilder", "substitute", "BUILTIN_CONSTANTS",
           "ParamError", "PipelineError", "Index", "MAX_SOURCE_BYTES", "MAX_AGENTS",
           "MAX_BARRIERS", "MAX_STAGES", "MAX_CHUNKS", "MAX_LINES", "MAX_NODES",
           "MAX_REGISTERS", "MAX_ELEMENTS", "MAX_HELPER_DEPTH", "MAX_CLUSTER", "PARAM_LIMIT"]
