"""Runs a generated pipeline kernel (`app.capture.codegen`) on a GPU and returns its raw log.

A capture names a pipeline (a built-in id or a pipeline text), its parameters and bug toggles, and
how to launch it. `plan()` compiles the pipeline exactly as the engine does and generates the CUDA
source; `capture()` runs the launch in a child process (`python -m app.capture.gen_runner --child`)
because a kernel that over-arrives traps and takes its CUDA context with it, while the log lives
in mapped, pinned host memory and survives. The parent never imports CuPy. The raw log (format
`mbarrier-inspector/raw-gpu-log`, version 2) carries the pipeline text itself, so the replay
(`app.replay.gpu_order`) compiles the very program the kernel was generated from.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from . import codegen as G
from .codegen import COMPILE_OPTIONS
from .stored import stored_report

HUNG = "launch_hung"
"""The raw log's `error.name` when the kernel did not finish within `host_bound_s`."""
RAW_FORMAT = "mbarrier-inspector/raw-gpu-log"
RAW_VERSION = 2
CLOCK_HZ_GUESS = 1.98e9


@dataclass
class GenCapture:
    """One capture of a generated kernel."""

    name: str
    pipeline: str
    """A built-in scenario id, or a pipeline text (anything with a newline in it)."""
    params: dict = field(default_factory=dict)
    bugs: list[str] = field(default_factory=list)
    ctas: int = 1
    """CTAs launched: a multiple of the pipeline's cluster size."""
    log_ctas: int = 1
    """Units (CTAs, or clusters) that log every line; the others only write their summary."""
    timeout_us: float = 2000.0
    flush_every: int = G.STAGE_RECORDS
    """Records an agent stages before copying them to the host (1: each one at once)."""
    flush_before_arrive: bool = False
    """Copy staged records out before every arrive, where the kernel may trap (an arrive is what
    traps): the trap then loses only the trapping arrive's record."""
    host_bound_s: float = 10.0
    """A launch not finished by then hangs (every wait in the kernel gives up within
    `timeout_us`, but a remote arrive into an exited CTA never completes): the child keeps the
    log it has and exits."""
    exit_sync: bool = False
    """A cluster's CTAs meet at a cluster barrier before they exit (safer than the program,
    which has none): kept for the capture that shows what that barrier hides."""

    def as_dict(self) -> dict:
        return asdict(self)


@dataclass
class Plan:
    """What a capture runs: the compiled program, its CUDA source and the log's size."""

    capture: GenCapture
    scenario_id: str | None
    source: str
    sha256: str
    params: dict
    bugs: list[str]
    program: object
    cuda: str
    layout: G.Layout
    log_cap: int


def resolve(pipeline: str, params: dict, bugs):
    """(scenario id or None, pipeline text, PipelineConfig) as the engine would run it."""
    from app.scenarios import from_source, get

    if "\n" in pipeline:
        scenario = from_source(pipeline)
    else:
        scenario = get(pipeline)
    cfg = scenario.resolve(params, list(bugs))
    return scenario.id, scenario.source, cfg


def plan(cap: GenCapture) -> Plan:
    """Compile the pipeline, generate its kernel and size its log (no GPU needed)."""
    from app.sim.schedule import Schedule
    from app.sim.trace import Run

    scenario_id, source, cfg = resolve(cap.pipeline, cap.params, cap.bugs)
    params = dict(cfg.params)
    cuda = G.generate(cfg.program, title=scenario_id or cap.name, params=params, bugs=cfg.bugs,
                      exit_sync=cap.exit_sync)
    # Size each agent's log from a simulated run: twice the longest agent's lines, and room.
    run = Run.complete(cfg, Schedule("round_robin"), step_limit=200_000)
    counts = [0] * len(cfg.program.agents)
    for move in run.choices:
        if move < len(counts):
            counts[move] += 1
    cap_records = max(256, 2 * max(counts, default=0) + 64)
    return Plan(cap, scenario_id, source, cfg.source_sha256, params, sorted(cfg.bugs),
                cfg.program, cuda, G.layout(cfg.program), cap_records)


def tagged_memory(lay: G.Layout, program, ctas: int):
    """Global memory as the kernel expects it: word w of tile n holds (tag << 16) | w."""
    import numpy as np

    words = lay.gmem_cta_bytes // 4
    mem = np.zeros((ctas, words), dtype=np.uint32)
    for t, (_, elements, nbytes) in enumerate(program.tensors):
        per = nbytes // 4
        first = lay.tensor_offsets[t] // 4
        tiles = np.arange(elements, dtype=np.uint64)[None, :] + lay.tensor_tiles[t]
        base = (np.arange(ctas, dtype=np.uint64)[:, None] * lay.tiles_per_cta + tiles) & 0xFFFF
        w = np.arange(per, dtype=np.uint64) & 0xFFFF
        block = (base[:, :, None] << np.uint64(16)) | w[None, None, :]
        block = block.reshape(ctas, elements, per).astype(np.uint32)
        box = dict(lay.tensor_maps).get(t)
        if box is None:
            mem[:, first:first + elements * per] = block.reshape(ctas, -1)
        else:
            _as_tensor(mem, first, block, box)
    return mem


def _as_tensor(mem, first: int, tiles, box) -> None:
    """Lay a tensor map's tiles out as the tensor (row-major, dimension 0 innermost, in words):
    box k's image lands where the TMA reads box k, so a box copied into shared memory holds its
    tile's words in order; what lies outside the tensor is not stored (the TMA fills it)."""
    import numpy as np

    elem = box.nbytes // int(np.prod(box.box))
    bw = [box.box[0] * elem // 4, *box.box[1:]]
    ext = [box.shape[0] * elem // 4, *box.shape[1:]]
    size = int(np.prod(ext))
    for u in range(mem.shape[0]):
        tensor = np.zeros(ext[::-1], dtype=np.uint32)
        for k, image in enumerate(tiles[u]):
            g, rest = [], k
            for n in box.grid:
                g.append(rest % n)
                rest //= n
            image = image.reshape(bw[::-1])
            where, keep = [], []
            for d in reversed(range(len(bw))):
                lo = g[d] * bw[d]
                hi = min(lo + bw[d], ext[d])
                where.append(slice(lo, hi))
                keep.append(slice(0, hi - lo))
            tensor[tuple(where)] = image[tuple(keep)]
        mem[u, first:first + size] = tensor.reshape(-1)


def encode_tensor_maps(gmem, lay: G.Layout, program) -> None:
    """Write each unit's CUtensorMap of every tensor map into its slice of `gmem` (a CuPy
    array), with cuTensorMapEncodeTiled: the tensor's shape and row strides, the box, no
    interleave, no swizzle, zero fill out of bounds (PTX 5.5.3.3)."""
    import cupy
    import numpy as np
    from cuda.bindings import driver as cu

    kinds = {1: "UINT8", 2: "UINT16", 4: "UINT32", 8: "INT64"}
    base = gmem.data.ptr
    units = gmem.shape[0]
    for i, (t, box) in enumerate(lay.tensor_maps):
        elem = box.nbytes // int(np.prod(box.box))
        dtype = getattr(cu.CUtensorMapDataType, f"CU_TENSOR_MAP_DATA_TYPE_{kinds[elem]}")
        strides = [int(np.prod(box.shape[:d])) * elem for d in range(1, len(box.shape))]
        for u in range(units):
            address = base + u * lay.gmem_cta_bytes + lay.tensor_offsets[t]
            err, tmap = cu.cuTensorMapEncodeTiled(
                dtype, len(box.shape), address, [cu.cuuint64_t(n) for n in box.shape],
                [cu.cuuint64_t(s) for s in strides], [cu.cuuint32_t(b) for b in box.box],
                [cu.cuuint32_t(1)] * len(box.shape),
                cu.CUtensorMapInterleave.CU_TENSOR_MAP_INTERLEAVE_NONE,
                cu.CUtensorMapSwizzle.CU_TENSOR_MAP_SWIZZLE_NONE,
                cu.CUtensorMapL2promotion.CU_TENSOR_MAP_L2_PROMOTION_NONE,
                cu.CUtensorMapFloatOOBfill.CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE)
            if err != cu.CUresult.CUDA_SUCCESS:
                raise RuntimeError(f"cuTensorMapEncodeTiled({box.name}): {err.name}")
            words = np.array([int(x) for x in tmap.opaque], dtype=np.uint64).view(np.uint32)
            at = (lay.map_offset + 128 * i) // 4
            gmem[u, at:at + words.size] = cupy.asarray(words)


# ------------------------------------------------------------------------------- parent side


def capture(cap: GenCapture, timeout_s: float = 180.0, python: str | None = None) -> dict:
    """Run one capture in a child process; its raw log (with `error` set if it failed)."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "raw.json"
        cmd = [python or sys.executable, "-m", "app.capture.gen_runner", "--child",
               json.dumps(cap.as_dict()), str(out)]
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s,
                                  check=False)
            returncode, stderr = proc.returncode, proc.stderr
        except subprocess.TimeoutExpired as exc:
            returncode, stderr = None, f"the capture process ran past {timeout_s} s: {exc}"
        if out.exists():
            raw = json.loads(out.read_text())
        else:
            raw = {"format": RAW_FORMAT, "version": RAW_VERSION, "name": cap.name,
                   "config": cap.as_dict(), "records": [], "summary": [],
                   "error": {"name": "capture_process_died",
                             "message": f"exit code {returncode}; stderr: {stderr[-2000:]}"}}
        raw["child_exit_code"] = returncode
        return raw


# -------------------------------------------------------------------------------- child side


def run_capture(cap: GenCapture) -> dict:
    """Compile and launch the generated kernel in this process (needs CuPy and a Hopper GPU)."""
    import cupy
    import numpy as np

    from .device import MappedBuffer, cuda_error_name, device_info, evict_l2

    p = plan(cap)
    raw = _raw(p)
    raw["device"] = device_info()
    start = time.perf_counter()
    fn = cupy.RawKernel(p.cuda, "pipeline_kernel", options=COMPILE_OPTIONS)
    fn.compile()
    raw["launch"]["compile_s"] = round(time.perf_counter() - start, 3)
    n_agents = len(p.program.agents)
    cluster = p.layout.cluster
    if cap.ctas % cluster:
        raise ValueError(f"{cap.ctas} CTAs do not make clusters of {cluster}")
    units = cap.ctas // cluster
    host_mem = tagged_memory(p.layout, p.program, units)
    gmem = cupy.asarray(host_mem)
    if p.layout.tensor_maps:
        encode_tensor_maps(gmem, p.layout, p.program)
    log = MappedBuffer(max(1, cap.log_ctas) * n_agents * p.log_cap * G.RECORD_WORDS * 8)
    summary = MappedBuffer(units * n_agents * G.SUMMARY_WORDS * 4)
    deadline = np.uint64(int(cap.timeout_us * 1e-6 * CLOCK_HZ_GUESS))
    smem = p.layout.smem_bytes
    if smem > 48 * 1024:
        fn.max_dynamic_shared_size_bytes = smem
    args = (gmem, np.uint64(log.device_ptr), np.uint64(summary.device_ptr),
            np.uint32(cap.log_ctas), np.uint32(p.log_cap), deadline,
            np.uint32(cap.flush_every), np.uint32(int(cap.flush_before_arrive)))
    raw["launch"].update({"kernel": "pipeline_kernel", "grid": cap.ctas, "cluster": cluster,
                          "block": p.layout.threads, "smem_bytes": smem,
                          "deadline_cycles": int(deadline), "log_cap": p.log_cap,
                          "flush_every": cap.flush_every,
                          "flush_before_arrive": cap.flush_before_arrive,
                          "options": list(COMPILE_OPTIONS)})
    evict_l2()
    cupy.cuda.Device(0).synchronize()
    ev0, ev1 = cupy.cuda.Event(), cupy.cuda.Event()
    raw["captured_at"] = _now()
    try:
        ev0.record()
        launch(fn, cap.ctas, p.layout.threads, smem, cluster, args)
        ev1.record()
        start = time.perf_counter()
        while not ev1.done and time.perf_counter() - start < cap.host_bound_s:
            time.sleep(0.0005)
        if ev1.done:
            ev1.synchronize()
            raw["elapsed_ms"] = round(cupy.cuda.get_elapsed_time(ev0, ev1), 4)
        else:  # no CUDA call returns now: read the mapped log as it stands, then exit
            raw["error"] = {"name": HUNG, "message": (
                f"the kernel had not finished {cap.host_bound_s} s after its launch: a thread "
                "never completed an operation (on the H200, a remote arrive into a CTA that "
                "has exited never completes); the log is what the agents had copied out")}
    except Exception as exc:  # a trap surfaces here as a CUDA runtime error
        raw["error"] = {"name": cuda_error_name(exc), "message": str(exc)}
    words = log.view(np.uint64).reshape(max(1, cap.log_ctas), n_agents, p.log_cap,
                                        G.RECORD_WORDS)
    records = []
    for cta in range(cap.log_ctas):
        for slot in range(n_agents):
            for rec in words[cta, slot]:
                if int(rec[0]) == 0:
                    break
                records.append([cta, slot, *(int(w) for w in rec)])
    raw["records"] = records
    raw["summary"] = summary.view(np.uint32).reshape(units, n_agents,
                                                     G.SUMMARY_WORDS).tolist()
    if raw["error"] is None:
        raw["dst"] = stored_report(cupy.asnumpy(gmem), host_mem, p)
    return raw


def launch(fn, grid: int, block: int, smem: int, cluster: int, args: tuple) -> None:
    """Launch a CuPy RawKernel; a cluster through the driver's cuLaunchKernelEx with the
    cluster dimension attribute (CuPy's own launch cannot set it)."""
    if cluster == 1:
        fn((grid,), (block,), args, shared_mem=smem)
        return
    import ctypes

    import cupy
    from cuda.bindings import driver as cu

    config = cu.CUlaunchConfig()
    config.gridDimX, config.gridDimY, config.gridDimZ = grid, 1, 1
    config.blockDimX, config.blockDimY, config.blockDimZ = block, 1, 1
    config.sharedMemBytes = smem
    config.hStream = cu.CUstream(cupy.cuda.get_current_stream().ptr)
    attr = cu.CUlaunchAttribute()
    attr.id = cu.CUlaunchAttributeID.CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION
    attr.value.clusterDim.x, attr.value.clusterDim.y, attr.value.clusterDim.z = cluster, 1, 1
    config.attrs = [attr]
    config.numAttrs = 1
    types = {8: ctypes.c_uint64, 4: ctypes.c_uint32}
    values, ctypes_of = [], []
    for arg in args:
        if hasattr(arg, "data") and hasattr(arg.data, "ptr"):  # a CuPy array: its pointer
            values.append(arg.data.ptr)
            ctypes_of.append(ctypes.c_void_p)
        else:
            values.append(int(arg))
            ctypes_of.append(types[arg.dtype.itemsize])
    (err,) = cu.cuLaunchKernelEx(config, cu.CUfunction(fn.kernel.ptr),
                                 (tuple(values), tuple(ctypes_of)), 0)
    if err != cu.CUresult.CUDA_SUCCESS:
        raise RuntimeError(f"cuLaunchKernelEx: {err.name}")


def _raw(p: Plan) -> dict:
    cap = p.capture
    return {
        "format": RAW_FORMAT, "version": RAW_VERSION, "generator": "app.capture.codegen",
        "name": cap.name,
        "pipeline": {"id": p.scenario_id, "source": p.source, "sha256": p.sha256,
                     "params": p.params, "bugs": p.bugs},
        "config": cap.as_dict(),
        "agents": [a.name for a in p.program.agents],
        "layout": p.layout.as_dict(),
        "kinds": dict(G.KIND_CODE),
        "device": {}, "launch": {}, "captured_at": _now(), "error": None, "elapsed_ms": None,
        "record_words": G.RECORD_WORDS, "records": [], "summary": [], "dst": None,
    }


def _now() -> str:
    import datetime as dt

    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _child(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="app.capture.gen_runner")
    parser.add_argument("--child", nargs=2, metavar=("CAPTURE_JSON", "OUT"), required=True)
    args = parser.parse_args(argv)
    cap = GenCapture(**json.loads(args.child[0]))
    try:
        raw = run_capture(cap)
    except Exception as exc:  # no GPU, no CuPy, a compile error: say so in the raw log
        raw = {"format": RAW_FORMAT, "version": RAW_VERSION, "name": cap.name,
               "config": cap.as_dict(), "records": [], "summary": [],
               "error": {"name": type(exc).__name__, "message": str(exc)[-4000:]}}
    Path(args.child[1]).write_text(json.dumps(raw))
    sys.stdout.flush()
    os._exit(0)  # a trapped context cannot be torn down cleanly


if __name__ == "__main__":
    sys.exit(_child(sys.argv[1:]))
