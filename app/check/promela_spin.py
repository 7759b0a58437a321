"""SPIN on an exported model (app/check/promela.py): build pan, ask it kind by kind, count its
states, and turn its trails back into the engine's manual schedules.

pan stops at its first error, so reachability is asked one kind at a time: one compiled pan,
run once per kind with `MBI_QUERY` naming the kind whose assertions are armed (`-E`: invalid
end states are not asked then); `deadlock` is pan's invalid end state (no kind armed);
`livelock` is a non-progress cycle of the `LIVELOCK` variant (`-DNP`, `pan -l -f`).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from app.sim.config import PipelineConfig
from app.sim.machine import Machine

from .promela import COUNT, KINDS, MAX_OPS, Exporter, Model, export

HEADER = "/* mbarrier-inspector-config: "
GCC_FLAGS = ("-w", "-DVECTORSZ=65536", "-DMEMLIM=2048")
"""With -DSAFETY (safety, deadlock) or -DNP (livelock); -DNOREDUCE where states are counted."""
PAN_DEPTH = 1_000_000
LIVELOCK = "livelock"
DEADLOCK = "deadlock"


class SpinMissing(RuntimeError):
    """`spin` or `gcc` is not on PATH."""


class SpinError(RuntimeError):
    """spin, gcc or pan failed, or pan's answer cannot be read."""


class TooFewOps(SpinError):
    """The export's table of copies in flight was too small (`max_ops`)."""


def tools() -> tuple[str, str]:
    spin, gcc = shutil.which("spin"), shutil.which("gcc")
    if not spin or not gcc:
        raise SpinMissing("SPIN needs `spin` and `gcc` on PATH (Debian: apt-get install spin)")
    return spin, gcc


def model_text(cfg: PipelineConfig, origin: dict, max_ops: int | None = None) -> str:
    """The model with the configuration it came from in its first line (`trail` reads it):
    `origin` is {"scenario": id} or {"source": text}, plus params and bugs."""
    model = export(cfg, max_ops)
    header = json.dumps({**origin, "params": dict(cfg.params), "bugs": sorted(cfg.bugs)},
                        sort_keys=True).replace("*/", "*\\/")
    return f"{HEADER}{header} */\n{model.text}"


def read_origin(text: str) -> dict:
    first = text.split("\n", 1)[0]
    if not first.startswith(HEADER) or not first.endswith(" */"):
        raise SpinError("not a model written by `mbarrier-inspector promela` (no "
                        "configuration in its first line)")
    return json.loads(first[len(HEADER):-3])


def _run(cmd: list[str], cwd: Path, env: dict | None = None, timeout: float | None = None
         ) -> str:
    try:
        proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=timeout,
                              env={**os.environ, **(env or {})}, check=False)
    except subprocess.TimeoutExpired as err:
        raise TimeoutError(f"{cmd[0]} ran past {timeout} s") from err
    out = proc.stdout + proc.stderr
    if proc.returncode != 0 and not cmd[0].endswith("pan"):
        raise SpinError(f"{' '.join(cmd)} failed: {out.strip()[-400:]}")
    return out


@dataclass
class PanRun:
    """One pan search: what it found and what it cost."""

    kind: str
    reached: bool
    states: int
    depth: int
    seconds: float
    complete: bool
    """False where pan's depth limit or memory cut the search (an unreached kind may then be
    reachable)."""
    output: str
    trail: Path | None = None


class Pan:
    """One exported model built into pan in `workdir` (mode: "safety", "livelock", "count")."""

    def __init__(self, text: str, workdir: Path, mode: str = "safety",
                 timeout: float | None = None, optimize: str = "-O2",
                 small: bool = False):
        spin, gcc = tools()
        self.workdir = Path(workdir)
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.mode = mode
        self.timeout = timeout
        self.small = small
        """A small state space (the tests'): a 2^18-slot hash table and depth 100,000, so
        each pan run starts in milliseconds rather than allocating 180 MB."""
        self.pml = self.workdir / "model.pml"
        self.pml.write_text(text)
        defines = {"safety": [], "livelock": ["-DLIVELOCK"], "count": ["-DCOUNT"]}[mode]
        start = time.perf_counter()
        _run([spin, *defines, "-a", self.pml.name], self.workdir, timeout=timeout)
        self.generate_s = time.perf_counter() - start
        flags = {"safety": ["-DSAFETY"], "livelock": ["-DNP"],
                 "count": ["-DSAFETY", "-DNOREDUCE"]}[mode]
        self.gcc_flags = [optimize, *GCC_FLAGS, *flags]
        start = time.perf_counter()
        _run([gcc, *self.gcc_flags, "-o", "pan", "pan.c"], self.workdir, timeout=timeout)
        self.compile_s = time.perf_counter() - start

    def pan_flags(self, kind: str | None) -> list[str]:
        flags = ["-m100000", "-w18"] if self.small else [f"-m{PAN_DEPTH}"]
        if self.mode == "count" or kind == "count":
            return [*flags, "-E"]
        if kind == LIVELOCK:
            return [*flags, "-l", "-f", "-E"]
        if kind == DEADLOCK:
            return flags
        return [*flags, "-E"]

    def run(self, kind: str | None) -> PanRun:
        """Ask pan whether `kind` is reachable (None: count states, `count` mode; "count":
        count states with the safety pan, its settling move switched off at run time)."""
        trail = self.pml.with_name(self.pml.name + ".trail")
        trail.unlink(missing_ok=True)
        query = (str(KINDS.index(kind) + 1) if kind in KINDS and kind != DEADLOCK else
                 str(COUNT) if kind == "count" else "0")
        start = time.perf_counter()
        out = _run(["./pan", *self.pan_flags(kind)], self.workdir, {"MBI_QUERY": query},
                   self.timeout)
        seconds = time.perf_counter() - start
        if "assertion violated (NOPS<" in out:
            raise TooFewOps("the export's table of copies in flight is too small for this "
                            "configuration (pass a larger max_ops)")
        errors = _number(r"errors: (\d+)", out)
        states = _number(r"(\d+) states, stored", out)
        depth = _number(r"depth reached (\d+)", out)
        if errors is None or states is None:
            raise SpinError(f"pan's answer cannot be read: {out.strip()[-400:]}")
        complete = not any(s in out for s in ("max search depth too small", "out of memory",
                                              "reached -DMEMLIM"))
        reached = errors > 0
        if reached:
            expected = {LIVELOCK: "non-progress cycle", DEADLOCK: "invalid end state"}.get(
                kind, f"(QV!={query})")
            if expected not in out:
                raise SpinError(f"pan, asked for {kind}, found another error: "
                                f"{out.strip()[:300]}")
        return PanRun(kind or "count", reached, states, depth or 0, seconds, complete, out,
                      trail if trail.exists() else None)

    def moves(self) -> tuple[list[tuple[str, int]], int | None]:
        """The trail pan wrote, replayed by `spin -t`: (mover kind, number) per move, and the
        index of the first move of the cycle (a non-progress cycle) or None."""
        spin, _ = tools()
        defines = ["-DLIVELOCK"] if self.mode == "livelock" else []
        out = _run([spin, *defines, "-t", self.pml.name], self.workdir, timeout=self.timeout)
        return parse_replay(out)


def parse_replay(out: str) -> tuple[list[tuple[str, int]], int | None]:
    moves, cycle = [], None
    for line in out.splitlines():
        if "START OF CYCLE" in line:
            cycle = len(moves)
            continue
        match = re.search(r"MOVE ([ath]) (\d+)", line)
        if match:
            moves.append((match.group(1), int(match.group(2))))
    return moves, cycle


def _number(pattern: str, text: str) -> int | None:
    match = re.search(pattern, text)
    return int(match.group(1)) if match else None


def schedule(cfg: PipelineConfig, moves: list[tuple[str, int]]) -> list[str]:
    """pan's moves as the engine's mover names (`Schedule('manual')`), replayed on a machine:
    an agent by its number, a TMA move by the copy's place in flight, a hold after them."""
    machine = Machine(cfg)
    names = []
    for what, number in moves:
        if what == "a":
            move = number
        elif what == "t":
            move = machine.n_agents + 1 + number
        else:
            move = machine.hold_base + number
        if move not in machine.ready:
            raise SpinError(f"SPIN's move {what} {number} is not a move of the engine here "
                            f"(step {len(names) + 1}): the export and the engine disagree")
        names.append(machine.moves()[move])
        machine.step(move)
    return names


def reachable(cfg: PipelineConfig, workdir: Path, kinds=KINDS, livelock: bool = False,
              timeout: float | None = None, optimize: str = "-O2", count: bool = False
              ) -> dict[str, PanRun]:
    """Every kind asked, one pan run each (and the livelock variant when asked; with `count`,
    out["count"]: the stored states of the same pan with its settling move off, the unreduced
    search's plus one); the table of copies in flight is doubled until it is large enough."""
    return _roomy(cfg, lambda ops: _reachable(cfg, Path(workdir), kinds, livelock, timeout,
                                              optimize, count, ops))


def _reachable(cfg, workdir, kinds, livelock, timeout, optimize, count, max_ops
               ) -> dict[str, PanRun]:
    text = export(cfg, max_ops).text
    small = optimize == "-O0"
    pan = Pan(text, workdir / "safety", "safety", timeout, optimize, small)
    out = {kind: pan.run(kind) for kind in kinds}
    if count:
        out["count"] = pan.run("count")
    if livelock:
        out[LIVELOCK] = Pan(text, workdir / "livelock", "livelock", timeout, optimize,
                            small).run(LIVELOCK)
    return out


def count_states(cfg: PipelineConfig, workdir: Path, timeout: float | None = None,
                 optimize: str = "-O2") -> PanRun:
    """pan's stored states of the COUNT variant (no reduction): the unreduced search's states
    plus one, the state before the initialising step (docs/checker.md)."""
    return _roomy(cfg, lambda ops: Pan(export(cfg, ops).text, Path(workdir), "count", timeout,
                                       optimize, optimize == "-O0").run(None))


def _roomy(cfg: PipelineConfig, attempt):
    ops = Exporter(cfg).max_ops
    while True:
        try:
            return attempt(ops)
        except TooFewOps:
            if ops >= MAX_OPS:
                raise
            ops = min(MAX_OPS, 2 * ops)


__all__ = ["KINDS", "Model", "Pan", "PanRun", "SpinError", "SpinMissing", "count_states",
           "model_text", "reachable", "read_origin", "schedule", "tools"]
