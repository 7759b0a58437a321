"""From a pipeline text to the program the engine runs.

The pipeline is compiled in layers that import one way (each only from those above it):

- `loader`: the text, its parameters and bug toggles (`load`, `resolve_params`,
  `check_requires`);
- `declarations`: the cluster, barriers, stages, tensors and tensor memory, folded over the
  parameter values;
- `agents`: each agent's body (registers, statements, loops, helper calls), one instance per
  element of an agent array and per CTA;
- `instructions`: one instruction statement to one engine `Line`: a new instruction's lowering
  is its row in its family's `FORMS` (app/sim) and its operand reader in
  `instructions.READERS`;
- this module: `instantiate`, which puts them together, and the public names.

Errors carry the line and column.
"""

from __future__ import annotations

from functools import lru_cache

from app.sim.program import Program

from .agents import AgentBuilder, substitute
from .declarations import (
    ArrayDecl,
    cluster_constants,
    cluster_shape,
    cta_constants,
    declarations,
)
from .errors import ParamError, PipelineError
from .exprs import Scope, constant
from .limits import (
    MAX_AGENTS,
    MAX_BARRIERS,
    MAX_CHUNKS,
    MAX_CLUSTER,
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
from .syntax import Agent, Helper, Index


@lru_cache(maxsize=256)
def instantiate(pipeline: Pipeline, values: tuple[tuple[str, int], ...]) -> Program:
    """The engine program for these parameter values (`resolve_params` checked them)."""
    shape = cluster_shape(pipeline, dict(values))
    ctas = shape[0] * shape[1]
    constants = {**dict(values), **cluster_constants(shape)}
    arrays, barriers, stages, tensors, tmems = declarations(pipeline, constants, ctas)
    kinds = {name: decl.kind for name, decl in arrays.items()}
    user_helpers = {h.name: h for h in pipeline.module.items if isinstance(h, Helper)}
    agents = []
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
            for rank in range(count):
                name = item.name if item.dim is None else f"{item.name}{rank}"
                if ctas > 1:
                    name = f"cta{cta}.{name}"
                here = {**constants, **cta_constants(shape, cta), "rank": rank}
                text, agent = pipeline.text, item
                variant = element_variant(pipeline, item.name, count, rank, Scope(here, kinds))
                if variant is not None:
                    text, agent = variant
                builder = AgentBuilder(text, arrays, here, user_helpers)
                agents.append(builder.build(name, agent))
    if not agents:
        raise PipelineError("a pipeline needs at least one `agent { ... }`",
                            len(pipeline.text.splitlines()) or 1, 1)
    return Program(tuple(barriers), tuple(stages), tuple(tensors), tuple(tmems), tuple(agents),
                   ctas)


__all__ = ["Pipeline", "load", "instantiate", "resolve_params", "check_requires", "sha256",
           "cluster_shape", "ArrayDecl", "AgentBuilder", "substitute", "BUILTIN_CONSTANTS",
           "ParamError", "PipelineError", "Index", "MAX_SOURCE_BYTES", "MAX_AGENTS",
           "MAX_BARRIERS", "MAX_STAGES", "MAX_CHUNKS", "MAX_LINES", "MAX_NODES",
           "MAX_REGISTERS", "MAX_ELEMENTS", "MAX_HELPER_DEPTH", "MAX_CLUSTER", "PARAM_LIMIT"]
