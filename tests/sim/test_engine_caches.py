"""The engine's per-step shortcuts give the answers of the full computation: round robin's
lazy choice against a scan of `ready`, the enabled-agent hint, the register-update plans."""

from app.scenarios import get
from app.sim.core import op_name
from app.sim.families import registers
from app.sim.machine import Machine
from app.sim.schedule import Schedule
from app.sim.trace import Run


def _scan(machine: Machine, last: int) -> int | None:
    ready = machine.enabled()
    if not ready:
        return None
    holds = machine.hold_base
    for move in ready:
        if move >= holds:
            break
        if move > last:
            return move
    return ready[0]


def test_round_robin_move_matches_a_scan_of_ready():
    scenario = get("double_buffer_tma")
    cfg = scenario.resolve({"stages": 2, "tiles": 6}, [])
    run = Run.complete(cfg, Schedule("random", seed=3), scenario.describe(cfg))
    for step in range(run.total_steps + 1):
        for last in range(-1, 8):
            machine = run.machine_at(step)
            assert machine.round_robin_move(last) == _scan(run.machine_at(step), last)


def test_the_hint_is_forgotten_by_every_step_and_thaw():
    scenario = get("double_buffer_tma")
    machine = Machine(scenario.resolve({"stages": 2, "tiles": 4}, []))
    frozen = machine.freeze()
    machine.thaw(frozen)  # `ready` unknown: round robin tests the agents itself
    move = machine.round_robin_move(-1)
    assert machine._picked == move
    machine.thaw(frozen)
    assert machine._picked == -1
    machine.round_robin_move(-1)
    machine.step(move)
    assert machine._picked == -1


def test_register_plans_follow_the_line_and_the_names():
    scenario = get("double_buffer_tma")
    cfg = scenario.resolve({"stages": 2, "tiles": 4}, [])
    registers._PLANS.clear()
    first = Run.complete(cfg, Schedule("round_robin"), scenario.describe(cfg)).document()
    registers._PLANS.clear()
    again = Run.complete(cfg, Schedule("round_robin"), scenario.describe(cfg)).document()
    assert first == again
    plan = next(iter(registers._PLANS.values()))
    stale = ((99, plan[0][0][1]),)
    registers._PLANS[id(stale)] = plan  # an entry under a wrong key is never used
    assert registers._plan(stale, plan[1] + ("x",) * 99)[3] == (("x", 99),)


def test_a_copy_name_is_kept_by_the_copy_itself():
    """core.op_name keeps a name per in-flight copy; a copy rebuilt by `thaw` (a new list equal to
    the old) gets its name again, and an entry whose copy is gone is never read."""
    scenario = get("double_buffer_tma")
    machine = Machine(scenario.resolve({"stages": 2, "tiles": 4}, []))
    while not machine.tma:
        machine.step(machine.round_robin_move(-1))
    op = machine.tma[0]
    name = op_name(machine, op)
    assert name == "load:t0" and machine.op_names[id(op)] == (op, name)
    impostor = list(op)
    impostor[1] = 3  # another tile
    machine.op_names[id(impostor)] = (op, name)  # a stale entry under another copy's id
    assert op_name(machine, impostor) == "load:t3"
    machine.thaw(machine.freeze())
    assert op_name(machine, machine.tma[0]) == name


def _stepped(cfg, limit: int) -> tuple:
    """Round robin one `Machine.step` at a time, as `Run` checkpoints and records it."""
    machine = Machine(cfg)
    moves, diagnostics, checkpoints, last = [], list(machine.stop_report), [machine.freeze()], -1
    while len(moves) < limit and machine.status == "running":
        move = machine.round_robin_move(last)
        if move is None:
            break
        last = move
        diagnostics.extend(machine.step(move)["diagnostics"])
        moves.append(move)
        if machine.step_no % 256 == 0:
            checkpoints.append(machine.freeze())
    return moves, diagnostics, checkpoints, machine.freeze()


def test_the_round_robin_loop_makes_the_moves_of_step_by_step():
    """app/sim/robin.py fuses choosing, stepping and settling: the same moves, diagnostics,
    checkpoints and final state, for runs that end done, deadlocked and undefined."""
    ends = set()
    for name, params, bugs in (
            ("double_buffer_tma", {"stages": 2, "tiles": 40, "consumers": 2}, []),
            ("double_buffer_tma", {"stages": 2, "tiles": 5, "consumers": 2},
             ["consumer_skips_release"]),
            ("double_buffer_tma", {}, ["producer_skips_empty_wait"]),
            ("double_buffer_tma", {"stages": 3, "tiles": 30}, ["expect_tx_short"]),
            ("cluster_multicast", {}, []),
            ("cluster_multicast", {}, ["no_producer_tail"])):
        scenario = get(name)
        cfg = scenario.resolve(params, bugs)
        run = Run.complete(cfg, Schedule("round_robin"), scenario.describe(cfg), step_limit=900)
        moves, diagnostics, checkpoints, final = _stepped(cfg, 900)
        assert list(run.choices) == moves
        assert run.diagnostics == diagnostics
        assert run.checkpoints == checkpoints
        assert run.machine.freeze() == final
        ends.add(run.machine.status)
    assert {"done", "deadlock", "undefined_behavior"} <= ends


def test_a_fused_blocker_answers_as_the_generic_test():
    """A line's `fused` test (Family.fused, app/sim/agent_code.py) gives its kind's generic
    test's answer in every state a run passes through, agent by agent."""
    from app.sim.agent_code import BLOCKERS

    compared = 0
    for name, bugs in (("double_buffer_tma", []), ("double_buffer_tma", ["forget_phase_toggle"]),
                       ("cluster_multicast", []), ("tilelang_3087_single_slot_parity", [])):
        scenario = get(name)
        cfg = scenario.resolve({}, bugs)
        for seed in (1, 2):
            run = Run.complete(cfg, Schedule("random", seed=seed), scenario.describe(cfg))
            for step in range(run.total_steps + 1):
                machine = run.machine_at(step)
                for a, code in enumerate(machine.code):
                    r = machine.regs[a]
                    pc = r[0]
                    if pc >= code.end or code.blockers[pc] is BLOCKERS.get(code.kinds[pc]):
                        continue
                    args = code.prepared[pc]
                    generic = BLOCKERS[code.kinds[pc]](machine, a, r, args)
                    assert code.blockers[pc](machine, a, r, args) == generic
                    compared += 1
    assert compared > 100


def _walk(code, r: list) -> None:
    """Machine._follow's generic walk of control nodes (the reference for a chain)."""
    from app.sim.agent_code import ASSIGN, LINE
    from app.sim.core import checked

    while r[0] < code.end and code.flow[r[0]] is not LINE:
        pc = r[0]
        target = code.flow[pc]
        if target is ASSIGN:
            for reg, fn in code.prepared[pc]:
                r[reg] = checked(fn(r))
            r[0] = pc + 1
        elif code.prepared[pc] is None:
            r[0] = target
        else:
            r[0] = pc + 1 if code.prepared[pc](r) else target


def _outcome(fn, r: list):
    try:
        fn(r)
    except Exception as error:  # noqa: BLE001 - the two must fail alike
        return r, type(error), getattr(error, "rule", None), str(error)
    return r, None


def _programs() -> dict:
    """Every catalogue scenario and every program of tests/sim/programs, by id."""
    from pathlib import Path

    from app.scenarios import catalogue, from_source

    scenarios = dict(catalogue())
    for path in sorted(Path("tests/sim/programs").glob("*.pipe")):
        scenarios[path.stem] = from_source(path.read_text())
    return scenarios


def test_a_control_chain_walks_as_the_generic_loop():
    """AgentCode.chains: from every control node of every catalogue and test program, with
    registers drawn at random (overflows and divisions by zero included), the chain leaves the
    registers as the generic walk does, or fails with the same error at the same node."""
    import functools
    import random

    rng = random.Random(5)
    scenarios = _programs()
    chains = 0
    for scenario in scenarios.values():
        for bug in [None, *scenario.bugs]:
            machine = Machine(scenario.resolve({}, [bug] if bug else []))
            for code, regs in zip(machine.code, machine.regs, strict=True):
                for pc, chain in enumerate(code.chains):
                    if chain is None:
                        continue
                    chains += 1
                    for _ in range(12):
                        r = [pc] + [rng.choice((0, 1, 2, 3, -1, 7, 2**62, rng.randrange(99)))
                                    for _ in regs[1:]]
                        walk = functools.partial(_walk, code)
                        assert _outcome(chain, list(r)) == _outcome(walk, list(r))
    assert chains > 50


def _assign(updates, r: list) -> None:
    from app.sim.core import checked

    for reg, fn in updates:
        r[reg] = checked(fn(r))


def test_an_assign_lines_compiled_updates_are_its_updates():
    """AgentCode.updates: every `assign` line of every catalogue and test program, random
    registers, gives the registers (or the error) of its updates run one by one."""
    import functools
    import random

    rng = random.Random(6)
    scenarios = _programs()
    lines = 0
    for scenario in scenarios.values():
        machine = Machine(scenario.resolve({}, []))
        for code, regs in zip(machine.code, machine.regs, strict=True):
            for pc, update in enumerate(code.updates):
                if update is None:
                    continue
                lines += 1
                for _ in range(12):
                    r = [pc] + [rng.choice((0, 1, 3, -1, 2**62, rng.randrange(99)))
                                for _ in regs[1:]]
                    one_by_one = functools.partial(_assign, code.prepared[pc][0])
                    assert _outcome(update, list(r)) == _outcome(one_by_one, list(r))
    assert lines > 20
