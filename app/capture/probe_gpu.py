"""The tx-count probes on the GPU (needs CuPy and a Hopper GPU): each function runs in a child
process of its own (app.capture.probes `--child`), since a trap ends that process's CUDA
context, and returns what the kernel wrote."""

from __future__ import annotations

from .codegen import COMPILE_OPTIONS
from .probe_kernels import SOURCE
from .probe_models import (
    CTAS,
    DEADLINE_CYCLES,
    EXIT,
    EXIT_CLUSTERS,
    EXIT_DEADLINE_CYCLES,
    EXIT_HOST_BOUND_S,
    EXIT_WORDS,
    NO_COMPLETE,
    PHASES,
    PIECES,
    PROBES,
    SCALE,
)


def run_probe(mode: str) -> dict:
    """One single-thread probe in this process (needs CuPy and a Hopper GPU)."""
    import cupy

    kernel = cupy.RawKernel(SOURCE, "tx_probe_kernel", options=COMPILE_OPTIONS)
    src = cupy.arange(1024, dtype=cupy.uint32).view(cupy.uint8)
    out = cupy.zeros(8, dtype=cupy.uint64)
    result = {"probe": mode, "program": PROBES[mode], "error": None}
    try:
        kernel((1,), (32,), (src, out, cupy.uint32(list(PROBES).index(mode)),
                             cupy.uint64(2_000_000)))
        cupy.cuda.Device().synchronize()
        words = [int(v) for v in out.get()]
    except Exception as exc:  # a trap: the context is gone, say which error it was
        result["error"] = type(exc).__name__ + ": " + str(exc).splitlines()[0][:200]
        return result
    result.update({
        "phase0_completed": bool(words[0]),
        "cycles": words[1],
        "parity_at_end": 0 if words[2] else 1,
        "parity_before_expect": (0 if words[3] else 1)
        if mode == "extra_copy_after_completion" else None,
        "finished": bool(words[7]),
    })
    return result


def run_scale() -> dict:
    """Every scale row and the piece-size and reuse rows, in this process (needs a GPU)."""
    import cupy
    import numpy as np

    kernel = cupy.RawKernel(SOURCE, "tx_scale_kernel", options=COMPILE_OPTIONS)
    src = cupy.arange(1024, dtype=cupy.uint32).view(cupy.uint8)

    def tally(announced, copies, copy_bytes, gap, reuse=0) -> dict:
        counts = cupy.zeros(8, dtype=cupy.uint32)
        kernel((CTAS,), (64,), (src, counts, np.uint32(announced), np.uint32(copies),
                                np.uint32(copy_bytes), np.uint32(gap), np.uint32(PHASES),
                                np.uint64(DEADLINE_CYCLES), np.uint32(reuse)))
        cupy.cuda.Device().synchronize()
        c = [int(v) for v in counts.get()]
        phases = CTAS * PHASES
        return {"phases": phases, "completed": c[0], "early": c[1], "hung": c[2],
                "partial_seen": c[3], "not_landed": c[4],
                "rates": {k: round(c[i] / phases, 4)
                          for i, k in ((0, "completed"), (1, "early"), (2, "hung"))}}

    rows = []
    for probe, program, announced, copies, copy_bytes, gap in SCALE:
        rows.append({"probe": probe, "program": program, "announced": announced,
                     "copies": [copy_bytes] * copies, "gap_ns": gap,
                     **tally(announced, copies, copy_bytes, gap)})
    pieces = []
    for n in PIECES:
        pieces.append({"probe": f"announce_{n}", "announced": n, "copies": [4096], "gap_ns": 0,
                       "program": f"arrive.expect_tx {n}, then one 4,096-byte copy",
                       **tally(n, 1, 4096, 0)})
    reuse = tally(0, 0, 16, 0, reuse=1)
    return {"rows": rows, "pieces": pieces, "reuse": reuse}


def run_no_complete(probe: str) -> dict:
    """One `.noComplete` probe in this process (needs CuPy and a Hopper GPU): what the thread
    wrote to mapped host memory, which survives a trap, and the launch's error if any."""
    import cupy
    import numpy as np

    from .device import MappedBuffer, cuda_error_name

    mode, _, what = NO_COMPLETE[probe]
    kernel = cupy.RawKernel(SOURCE, "nc_probe_kernel", options=COMPILE_OPTIONS)
    kernel.compile()
    out = MappedBuffer(16 * 8)
    result = {"probe": probe, "program": what, "error": None}
    try:
        kernel((1,), (32,), (np.uint64(out.device_ptr), np.uint32(mode)))
        cupy.cuda.Device().synchronize()
    except Exception as exc:  # a trap: the context is gone, the mapped words are not
        result["error"] = {"name": cuda_error_name(exc), "message": str(exc).splitlines()[0]}
    w = [int(v) for v in out.view(np.uint64)]
    result["reached"] = w[0]
    if probe == "pending_count":
        result.update({"tokens": [hex(w[2]), hex(w[7])], "pending_count": [w[3], w[8]],
                       "phase0_completed": bool(w[4])})
        return result
    result.update({
        "word_before": hex(w[1]),
        "no_complete_returned": w[0] >= 2,
        "token": hex(w[2]) if w[0] >= 2 else None,
        "token_parity": w[2] >> 63 if w[0] >= 2 else None,
        "pending_count": w[3] if w[0] >= 2 else None,
        "phase0_completed": bool(w[4]) if w[0] >= 2 else None,
        "token_phase_completed": bool(w[5]) if w[0] >= 2 else None,
        "word_after": hex(w[6]) if w[0] >= 2 else None,
        "later_arrive_returned": w[0] >= 3,
        "later_token_parity": w[7] >> 63 if w[0] >= 3 else None,
        # test_wait.parity p is true when the current parity is not p
        "parity_after_later_arrive": (0 if w[9] else 1) if w[0] >= 3 else None,
        "word_after_later_arrive": hex(w[10]) if w[0] >= 3 else None,
        "parity_at_end": (1 if w[11] else 0) if w[0] >= 4 else None,
        "finished": w[0] >= 4,
    })
    return result


def run_exit(probe: str, launches: int) -> dict:
    """Up to `launches` launches of one remote_after_exit variant in this process, stopping at
    the first that fails (a trap ends the context) or does not finish within
    EXIT_HOST_BOUND_S (`hung`: the child then reports and exits at once)."""
    import time

    import cupy
    import numpy as np

    from .device import MappedBuffer, cuda_error_name
    from .gen_runner import launch

    mode, delay_us, _ = EXIT[probe]
    fn = cupy.RawKernel(SOURCE, "exit_probe_kernel", options=COMPILE_OPTIONS)
    fn.compile()
    src = cupy.arange(256, dtype=cupy.uint32).view(cupy.uint8)
    out = MappedBuffer(EXIT_CLUSTERS * EXIT_WORDS * 8)
    words = out.view(np.uint64).reshape(EXIT_CLUSTERS, EXIT_WORDS)
    runs = []
    for _ in range(launches):
        words[:] = 0
        run = {"ending": "finished", "error": None}
        args = (np.uint64(out.device_ptr), src, np.uint32(mode), np.uint64(delay_us * 1000),
                np.uint64(EXIT_DEADLINE_CYCLES))
        done = cupy.cuda.Event()
        try:
            launch(fn, 2 * EXIT_CLUSTERS, 32, 0, 2, args)
            done.record()
            start = time.perf_counter()
            while not done.done and time.perf_counter() - start < EXIT_HOST_BOUND_S:
                time.sleep(0.001)
            if not done.done:
                run["ending"] = "hung"
            else:
                done.synchronize()
        except Exception as exc:
            run["ending"] = "trapped"
            run["error"] = {"name": cuda_error_name(exc), "message": str(exc).splitlines()[0]}
        w = words.copy()
        recorded = (w[:, 4] > 0) & (w[:, 0] >= 1)
        gap = (w[:, 1].astype(np.int64) - w[:, 4].astype(np.int64))[recorded]
        run.update({
            "clusters": EXIT_CLUSTERS,
            "reached": int((w[:, 0] >= 1).sum()),
            "returned": int((w[:, 0] >= 2).sum()),
            "peer_exit_recorded": int((w[:, 4] > 0).sum()),
            "after_peer_exit": int((gap > 0).sum()),
            "gap_cycles": ({"min": int(gap.min()), "median": int(np.median(gap)),
                            "max": int(gap.max())} if gap.size else None),
            "remote_returned": int((w[:, 7] == 3).sum()),
            "peer_saw_arrive": int(w[:, 5].sum()) if mode == 0 else None,
            "own_half_landed": int((w[:, 6] == 2).sum()) if mode == 2 else None,
            "own_half_gave_up": int((w[:, 6] == 1).sum()) if mode == 2 else None,
        })
        runs.append(run)
        if run["ending"] != "finished":
            break
    return {"probe": probe, "runs": runs}
