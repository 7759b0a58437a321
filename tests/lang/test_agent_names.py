"""Agent names: each agent has its own, and none takes a mover's name that is not an agent's
(`tma`, `tensor_core`), since a schedule (`moves=`, a session's step) names movers. The
messages are tested as output."""

from __future__ import annotations

import re

import pytest

from app.lang.compiler import RESERVED_AGENT_NAMES, instantiate, load, resolve_params
from app.lang.errors import PipelineError
from app.scenarios import get
from app.sim.config import PipelineConfig
from app.sim.machine import Machine

RING = get("double_buffer_tma").source
NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def error_of(text: str, params=None) -> PipelineError:
    pipeline = load(text)
    with pytest.raises(PipelineError) as info:
        instantiate(pipeline, tuple(sorted(resolve_params(pipeline, params or {}).items())))
    return info.value


def test_an_agent_named_tma_is_refused_at_its_name():
    text = RING.replace("agent producer {", "agent tma {")
    err = error_of(text)
    line = text.splitlines()[err.line - 1]
    assert err.render(text).splitlines() == [
        f"{err.line}:7: `tma` is a reserved name: it names the TMA engine (`moves=tma` moves "
        "its oldest copy in flight), so no agent may take it",
        f"{err.line} | {line}",
        " " * len(f"{err.line} | agent ") + "^",
        "hint: `tensor_core` and `tma` are reserved for the movers that are not agents; "
        "rename the agent, e.g. `tma_warp`",
    ]
    assert line == "agent tma {"


def test_an_agent_array_named_tensor_core_is_refused():
    text = RING.replace("agent consumer[consumers] {", "agent tensor_core[consumers] {")
    err = error_of(text)
    assert err.message.startswith("`tensor_core` is a reserved name: it names the tensor core")
    assert "`tensor_core` and `tma` are reserved" in err.hint
    assert text.splitlines()[err.line - 1][err.column - 1:].startswith("tensor_core[consumers]")


def test_names_that_merely_contain_a_reserved_word_are_fine():
    text = RING.replace("agent producer {", "agent tma_producer {")
    pipeline = load(text)
    program = instantiate(pipeline, tuple(sorted(resolve_params(pipeline, {}).items())))
    assert [a.name for a in program.agents] == ["tma_producer", "consumer0"]


def test_two_agents_of_one_name_are_refused():
    text = RING.replace("agent consumer[consumers] {", "agent producer {")
    err = error_of(text)
    first = text.splitlines().index("agent producer {") + 1
    assert err.message == f"agent `producer` is declared twice (first on line {first})"
    assert err.line > first and err.column == 7
    assert err.hint == "a schedule names the movers, so two agents cannot share a name"


def test_an_agent_named_like_an_array_element_is_refused():
    text = RING.replace("agent producer {", "agent consumer1 {")
    assert [a.name for a in instantiate(load(text), tuple(sorted(
        resolve_params(load(text), {}).items()))).agents] == ["consumer1", "consumer0"]
    err = error_of(text, {"consumers": 2})
    first = text.splitlines().index("agent consumer1 {") + 1
    assert err.message == (f"element 1 of agent `consumer[...]` is named `consumer1`, as agent "
                           f"`consumer1` on line {first} is: each agent needs its own name")


@pytest.mark.parametrize("scenario", ["kloop_tma_mma", "double_buffer_tma", "cluster_multicast"])
def test_every_mover_that_is_not_an_agent_has_a_reserved_or_unwritable_name(scenario):
    """Through a whole round-robin run, each mover the engine names is an agent, a reserved
    name, or a name no agent can have (it is not a NAME of the grammar: `tma:...`)."""
    sc = get(scenario)
    cfg: PipelineConfig = sc.resolve({})
    machine = Machine(cfg)
    agents = {a.name for a in machine.agents}
    seen = set()
    for _ in range(2000):
        names = machine.moves()
        seen.update(names)
        ready = machine.ready
        if not ready:
            break
        machine.step(ready[-1])  # the last ready mover first: TMA and tensor core moves too
    others = {n for n in seen - agents if NAME.fullmatch(n)}
    assert others <= set(RESERVED_AGENT_NAMES)
    assert "tensor_core" in seen and any(n.startswith("tma:") for n in seen)
