"""What a generated kernel and its host agree on: the log record's size and event kinds, the
shared-memory layout of barriers and stages, and what Hopper cannot run (app.capture.codegen)."""

from __future__ import annotations

from dataclasses import dataclass
from math import prod

from app.sim.program import Line, Program

COMPILE_OPTIONS = ("-std=c++17", "-arch=sm_90a")
"""NVRTC options of every kernel built here (Hopper's architecture-specific features)."""
RECORD_WORDS = 8
STAGE_RECORDS = 32
"""Records each agent keeps in shared memory before they are copied to the host."""
SUMMARY_WORDS = 4
POISON = 0xFFFFFFFF
SMEM_LIMIT = 227 * 1024

# Record kinds (word 2, bits 0..7). One per line kind, plus the agent's start and end.
KINDS = ("start", "end", "init", "arrive", "arrive_drop", "arrive_expect_tx", "expect_tx",
         "complete_tx", "wait_parity", "wait_token", "inval", "load", "store", "commit_group",
         "wait_group", "proxy_fence", "st_shared", "ld_shared", "ld_global", "error")
SYNC_KINDS = ("bar_sync", "bar_arrive", "elect", "warp_sync", "cluster_arrive", "cluster_wait",
              "mbarrier_init_fence")
"""Log kinds of the synchronization lines, numbered after `KINDS`: a kernel defines them only
where its program has such lines, so every other kernel's text stays as it was."""
ASYNC_KINDS = ("cp_async", "cp_async_commit", "cp_async_wait", "cp_async_arrive", "reduce_store",
               "st_async", "red_async", "tensor_load", "tensor_store", "wgmma_fence",
               "wgmma_mma", "wgmma_commit", "wgmma_wait", "setmaxnreg")
"""Log kinds of the asynchronous families' lines, numbered after those, defined likewise."""
LATER_KINDS = ("bar_red",)
"""Log kinds added since, numbered after all those so no earlier kernel's numbers move."""
KIND_CODE = {name: i + 1 for i, name in
             enumerate(KINDS + SYNC_KINDS + ASYNC_KINDS + LATER_KINDS)}
KIND_NAME = {code: name for name, code in KIND_CODE.items()}

END_FINISHED, END_TIMED_OUT, END_ERROR = 0, 1, 2
ERROR_OUT_OF_BOUNDS, ERROR_OPERAND_RANGE = 1, 2

HOPPER_MISSING = {"mma": "tcgen05.mma", "tc_commit": "tcgen05.commit",
                  "tc_fence": "tcgen05.fence", "tc_ld": "tcgen05.ld",
                  "tc_wait_ld": "tcgen05.wait::ld", "st_global": "st.global of tcgen05.ld "
                                                                  "registers"}


NAMED_BARRIER_EXIT = 15
"""The named barrier the kernel ends on where the program uses named barriers itself (else
`__syncthreads()`, barrier 0): the program may not use it."""


class CodegenError(ValueError):
    """A program the generator cannot turn into a Hopper kernel; the message says why."""


@dataclass(frozen=True)
class Layout:
    """Where everything lives: shared memory offsets, global tensor offsets, tile tags.

    In a cluster every CTA has the same shared-memory layout: the engine's flat barrier and
    stage numbers (over all CTAs) map to a CTA (`bar_cta`, `stage_cta`) and a place in it
    (`bar_local`, `stage_offsets`). Global tensors belong to the cluster: its CTAs share one
    slice of global memory (a "unit": one CTA without a cluster)."""

    barrier_offset: int
    stage_offsets: tuple[int, ...]
    """Shared-memory offset of each stage (flat number), within its own CTA."""
    staging_offset: int
    smem_bytes: int
    tensor_offsets: tuple[int, ...]
    """Byte offset of each tensor in one CTA's slice of global memory."""
    tensor_tiles: tuple[int, ...]
    """Tile number of each tensor's element 0 (tags count tiles over all tensors)."""
    gmem_cta_bytes: int
    tiles_per_cta: int
    threads: int
    """Threads of one CTA: a warp for each of its agents."""
    cluster: int = 1
    agents_per_cta: int = 1
    bar_local: tuple[int, ...] = ()
    bar_cta: tuple[int, ...] = ()
    stage_cta: tuple[int, ...] = ()
    logging: bool = True
    tensor_maps: tuple = ()
    """(tensor number, `TensorBox`) of every tensor a `cp.async.bulk.tensor` line copies: its
    global memory is laid out as the tensor (row-major, dimension 0 innermost), and one
    `CUtensorMap` of it per unit sits at `map_offset + 128 * i` of the unit's slice."""
    map_offset: int = 0
    warp_agent: tuple[int, ...] = ()
    """Where agents stand for several warps (`warps 4`, a warpgroup: `wgmma` is executed by all
    of its 128 threads, PTX 9.7.15.1): for each warp of a CTA, the agent (its number within the
    CTA) it runs, or -1 for a warp that pads a warpgroup to a multiple of four. Such an agent
    runs as that many warps, the first of which issues and logs. Empty: one warp per agent."""

    def as_dict(self) -> dict:
        return {"smem_bytes": self.smem_bytes, "stage_offsets": list(self.stage_offsets),
                "gmem_cta_bytes": self.gmem_cta_bytes, "tiles_per_cta": self.tiles_per_cta,
                "tensor_offsets": list(self.tensor_offsets),
                "tensor_tiles": list(self.tensor_tiles), "threads": self.threads,
                "cluster": self.cluster, "logging": self.logging}


def _align(n: int, a: int = 128) -> int:
    return (n + a - 1) // a * a


def _locals(decls) -> tuple[int, ...]:
    """Each declaration's place among those of its own CTA (the same in every CTA)."""
    seen: dict[int, int] = {}
    out = []
    for d in decls:
        out.append(seen.get(d.cta, 0))
        seen[d.cta] = out[-1] + 1
    return tuple(out)


def warps_of(program: Program) -> list[tuple[int, ...]]:
    """The warps of CTA 0, each the local agent numbers of its lanes (one for most)."""
    lanes: dict[int, list[int]] = {}
    for i, a in enumerate(program.agents):
        if a.cta == 0:
            lanes.setdefault(i if a.warp is None else a.warp, []).append(i)
    return [tuple(v) for v in lanes.values()]


def layout(program: Program, logging: bool = True) -> Layout:
    ctas = max(1, program.cluster)
    per_cta = len(program.agents) // ctas
    bar_local = _locals(program.barriers)
    offset = _align(8 * max(1, len(program.barriers) // ctas))
    local_offsets: list[int] = []
    placed: dict[int, int] = {}
    for s, stage in enumerate(program.stages):
        if stage.cta == 0:
            if stage.alias is not None and stage.alias[2]:  # a view: the bytes it lies over
                placed[s] = placed[stage.alias[0]] + stage.alias[1]
                local_offsets.append(placed[s])
                continue
            placed[s] = offset
            local_offsets.append(offset)
            offset = _align(offset + stage.bytes)
    stage_offsets = tuple(local_offsets[i] for i in _locals(program.stages))
    staging = offset
    smem = staging + (per_cta * STAGE_RECORDS * RECORD_WORDS * 8 if logging else 0)
    tensor_offsets, tensor_tiles, gbytes, tiles = [], [], 0, 0
    for _, elements, nbytes in program.tensors:
        tensor_offsets.append(gbytes)
        tensor_tiles.append(tiles)
        gbytes = _align(gbytes + elements * nbytes)
        tiles += elements
    warps = warp_agents(program, per_cta)
    maps = tensor_maps(program)
    map_offset = gbytes
    if maps:
        gbytes = _align(gbytes + 128 * len(maps))
    return Layout(0, stage_offsets, staging, smem, tuple(tensor_offsets), tuple(tensor_tiles),
                  gbytes, tiles, 32 * (len(warps) or len(warps_of(program))),
                  ctas, per_cta, bar_local,
                  tuple(b.cta for b in program.barriers), tuple(s.cta for s in program.stages),
                  logging, maps, map_offset, warps)


def tensor_maps(program: Program) -> tuple:
    """`Layout.tensor_maps`, from the boxes the program's tensor copies name."""
    boxes = {}
    for agent in program.agents:
        for node in agent.nodes:
            if isinstance(node, Line) and node.kind in ("tensor_load", "tensor_store"):
                box = node.args[1] if node.kind == "tensor_load" else node.args[0]
                boxes[box.name] = box
    names = [t[0] for t in program.tensors]
    return tuple(sorted((names.index(n), b) for n, b in boxes.items()))


def warpgroup_agent(agent) -> bool:
    """Whether an agent stands for several warps (`agent consumer warps 4`: a warpgroup, as
    `wgmma` needs), so runs as that many."""
    return agent.warps > 1


def warp_agents(program: Program, per_cta: int) -> tuple[int, ...]:
    """`Layout.warp_agent`: empty unless some agent stands for several warps. Those come first,
    each starting at a multiple of four warps (a warpgroup), padded with -1."""
    agents = program.agents[:per_cta]
    if not any(warpgroup_agent(a) for a in agents):
        return ()
    out: list[int] = []
    for i, agent in enumerate(agents):
        if warpgroup_agent(agent):
            out.extend([-1] * (-len(out) % 4))
            out.extend([i] * agent.warps)
    out.extend(i for i, agent in enumerate(agents) if not warpgroup_agent(agent))
    return tuple(out)


MAX_CLUSTER = 8
"""The portable cluster size: larger ones need an opt-in the generator does not make."""


def check(program: Program, logging: bool = True) -> None:
    """Raise CodegenError if the program cannot run on Hopper through this generator."""
    ctas = max(1, program.cluster)
    if ctas > MAX_CLUSTER:
        raise CodegenError(f"a cluster of {ctas} CTAs: at most {MAX_CLUSTER} launch portably")
    per_cta = len(program.agents) // ctas
    if any(a.cta != i // per_cta for i, a in enumerate(program.agents)):
        raise CodegenError("every CTA of the cluster must run the same agents, CTA by CTA")
    for agent in program.agents:
        for node in agent.nodes:
            if isinstance(node, Line) and node.kind in HOPPER_MISSING:
                raise CodegenError(
                    f"{agent.name}: `{node.op}` needs {HOPPER_MISSING[node.kind]}, which "
                    "Hopper (sm_90a) does not have: tcgen05 is Blackwell's (sm_100a); this "
                    "pipeline stays simulation-only")
    for agent in program.agents:
        if warpgroup_agent(agent) and any(a.lanes > 1 for a in program.agents):
            raise CodegenError(f"{agent.name}: an agent of `warps {agent.warps}` beside agents "
                               "of lanes: the generator places one or the other")
        if warpgroup_agent(agent) and any(isinstance(n, Line) and n.kind in ("elect",
                                                                              "warp_sync")
                                          for n in agent.nodes):
            raise CodegenError(f"{agent.name}: `elect.sync` / `bar.warp.sync` in an agent of "
                               f"`warps {agent.warps}`: in the kernel each of its warps would "
                               "take part on its own")
        if warpgroup_agent(agent) and any(isinstance(n, Line) and n.kind == "wait_token"
                                          for n in agent.nodes):
            raise CodegenError(f"{agent.name}: an agent of several warps waits on a "
                               "state token; the generator gives the token to its first warp "
                               "only: wait with `.parity`")
    lay = layout(program, logging)
    mapped = {program.tensors[t][0] for t, _ in lay.tensor_maps}
    for agent in program.agents:
        for node in agent.nodes:
            if not isinstance(node, Line):
                continue
            if node.kind == "tensor_store":
                raise CodegenError(f"{agent.name}: `{node.op}`: the generator does not write "
                                   "tensor stores yet")
            if node.kind in ("load", "store", "ld_global", "reduce_store") and any(
                    getattr(arg, "array", None) in mapped for arg in node.args):
                raise CodegenError(f"{agent.name}: `{node.op}` on a tensor map: in the kernel "
                                   "its memory is laid out as the tensor, so the generator "
                                   "copies it with `cp.async.bulk.tensor` only")
    for _, box in lay.tensor_maps:
        elem = box.nbytes // prod(box.box)
        if box.shape[0] * elem % 16 or box.box[0] * elem % 16:
            raise CodegenError(f"tensor map {box.name}: its rows and its box's rows must be "
                               "multiples of 16 bytes (cuTensorMapEncodeTiled)")
    _check_setmaxnreg(program, lay)
    if lay.threads > 1024:
        raise CodegenError(f"a CTA of {lay.threads} threads: an agent of `warps N` takes N "
                           "warps, and a block has at most 1,024 threads")
    if lay.smem_bytes > SMEM_LIMIT:
        raise CodegenError(f"the stages and the log need {lay.smem_bytes} bytes of shared "
                           f"memory; a Hopper block has at most {SMEM_LIMIT}")
    for stage in program.stages:
        if stage.chunk_bytes % 16 or stage.bytes % 16:
            raise CodegenError(f"{stage.name}: bulk copies move multiples of 16 bytes")
        if stage.alias is not None and not stage.alias[2] and stage.bytes % 128:
            raise CodegenError(f"{stage.name}: views of shared memory (`at`) need stages of "
                               "multiples of 128 bytes, so the kernel lays the stages they "
                               "view end to end")
        if stage.bytes // stage.chunk_bytes > 64:
            raise CodegenError(f"{stage.name}: at most 64 chunks a stage")
    for _, _elements, nbytes in program.tensors:
        if nbytes % 16:
            raise CodegenError("tensor elements must be multiples of 16 bytes")
        if nbytes // 4 > 0x10000:
            raise CodegenError("a tensor element holds at most 65,536 words (the tag encoding)")


REGISTER_FILE = 65536
"""32-bit registers of a Hopper SM, and the most one CTA is given."""
REGISTER_UNIT = 8
"""Per-thread registers a warp is allocated in (256 a warp)."""


def _check_setmaxnreg(program: Program, lay: Layout) -> None:
    """`setmaxnreg` runs as the program says only where the kernel's launch count is the
    program's `registers N` and the CTA can be launched with it: N a whole allocation unit, N
    registers for every thread of the block within the register file. (The language already
    asks for whole warpgroups and a constant count, a multiple of 8 in 24..256.)"""
    users = [a.name for a in program.agents
             if any(isinstance(n, Line) and n.kind == "setmaxnreg" for n in a.nodes)]
    if not users:
        return
    n = program.registers
    if n % REGISTER_UNIT:
        raise CodegenError(f"{users[0]}: `registers {n}` with setmaxnreg: a warp is allocated "
                           f"registers in units of {REGISTER_UNIT} per thread, so the CTA's "
                           "pool would not be the engine's; declare a multiple of 8")
    if n * lay.threads > REGISTER_FILE:
        raise CodegenError(f"{users[0]}: `registers {n}` for {lay.threads} threads needs "
                           f"{n * lay.threads:,} registers; a Hopper CTA has at most "
                           f"{REGISTER_FILE:,} (the launch would fail): at most "
                           f"{REGISTER_FILE // lay.threads // REGISTER_UNIT * REGISTER_UNIT} "
                           "registers a thread")
    if any(a.warps % 4 for a in program.agents if a.name in users) or any(
            w < 0 for w in lay.warp_agent):
        raise CodegenError(f"{users[0]}: setmaxnreg needs every warpgroup of the kernel whole "
                           "(.aligned: all four warps execute it)")
