"""`mbarrier-inspector capture`: run a scenario on the GPU and write its trace, or measure
bandwidth.

    mbarrier-inspector capture double_buffer_tma --stages 2 --tiles 8 --bugs forget_phase_toggle \
        --out traces/mine.json
    mbarrier-inspector capture bandwidth --out traces/bandwidth.json
    mbarrier-inspector capture my_ring.pipe --param stages=3 --bugs expect_tx_short \
        --out /tmp/my_ring.json            # a generated kernel (app.capture.codegen)

`app/cli.py` wires this in with `add_parser(subparsers)`; `run(args)` returns the exit code.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from .runner import SCENARIOS, CaptureConfig, CaptureError


def add_parser(subparsers) -> argparse.ArgumentParser:
    """Add the `capture` subcommand to an argparse subparsers object."""
    p = subparsers.add_parser(
        "capture", help="run a scenario on an NVIDIA Hopper GPU (CuPy) and write its trace",
        description="Run a scenario's kernel on a Hopper GPU, decode its event log into a trace "
                    "(source.kind = gpu), check it against the barrier model and write it; or "
                    "measure the TMA ring's bandwidth beside cudaMemcpy.")
    p.add_argument("scenario", help=f"{', '.join(SCENARIOS)} or bandwidth (the hand-written "
                                    "kernels), another built-in id, or a .pipe file (generated)")
    p.add_argument("--generated", action="store_true",
                   help="generate the kernel from the pipeline (always so for ids and files "
                        "that have no hand-written kernel)")
    p.add_argument("--stages", type=int, default=None)
    p.add_argument("--tiles", type=int, default=None)
    p.add_argument("--tile-bytes", type=int, default=None)
    p.add_argument("--chunk-bytes", type=int, default=None)
    p.add_argument("--consumers", type=int, default=None)
    p.add_argument("--param", action="append", default=[], metavar="NAME=VALUE",
                   help="a pipeline parameter (generated kernels)")
    p.add_argument("--bugs", default="", help="comma-separated bug toggles")
    p.add_argument("--ctas", type=int, default=1, help="CTAs launched (the first one is traced)")
    p.add_argument("--timeout-us", type=float, default=2000.0,
                   help="deadline of every bounded wait loop")
    p.add_argument("--raw", default="", help="also write the raw event log here")
    p.add_argument("--out", required=True, help="where to write the trace (or bandwidth) JSON")
    p.set_defaults(run=run)
    return p


def run(args: argparse.Namespace) -> int:
    """Capture, decode, check conformance, write; prints a one-line summary."""
    from .make_all import build_trace, write_json
    from .runner import bandwidth, capture

    out = Path(args.out)
    if args.scenario == "bandwidth":
        doc = bandwidth()
        write_json(out, doc)
        best = doc.get("best") or {}
        sys.stdout.write(f"memcpy {doc['memcpy']['gbps']} GB/s; best ring {best.get('gbps')} "
                         f"GB/s ({best.get('stages')} stages x {best.get('tile_bytes')} B); "
                         f"wrote {out}\n")
        return 0
    if args.generated or args.scenario not in SCENARIOS:
        return run_generated(args)
    given = {k: v for k, v in (("stages", args.stages), ("tiles", args.tiles),
                               ("tile_bytes", args.tile_bytes),
                               ("chunk_bytes", args.chunk_bytes),
                               ("consumers", args.consumers)) if v is not None}
    cfg = CaptureConfig(
        scenario=args.scenario, **given,
        bugs=[b for b in args.bugs.split(",") if b], ctas=args.ctas, timeout_us=args.timeout_us)
    try:
        cfg.validate()
    except CaptureError as exc:
        sys.stderr.write(f"capture: {exc}\n")
        return 2
    raw = capture(cfg)
    if args.raw:
        Path(args.raw).write_text(json.dumps(raw))
    error = raw.get("error")
    if error and not raw.get("records"):
        sys.stderr.write(f"capture: nothing was logged: {error.get('name')}: "
                         f"{error.get('message')}\n")
        return 1
    doc = build_trace(out.stem, raw)
    write_json(out, doc)
    conformance = doc["source"]["conformance"]
    sys.stdout.write(f"{doc['status']}: {doc['total_steps']} steps, "
                     f"{len(doc['diagnostics'])} diagnostics, conformance "
                     f"{'passes' if conformance['passes'] else 'FAILS'}; wrote {out}\n")
    return 0


def run_generated(args: argparse.Namespace) -> int:
    """Generate the pipeline's kernel, capture it, replay it in the GPU's order, write the trace
    (and, with --raw, the raw log and the kernel's .cu beside it)."""
    from app.lang.errors import ParamError, PipelineError
    from app.replay.gpu_order import document, replay

    from .codegen import CodegenError
    from .gen_runner import GenCapture, capture, plan
    from .make_all import write_json

    path = Path(args.scenario)
    pipeline = path.read_text() if path.suffix == ".pipe" else args.scenario
    params = {k: v for k, v in (("stages", args.stages), ("tiles", args.tiles),
                                ("tile_bytes", args.tile_bytes),
                                ("chunk_bytes", args.chunk_bytes),
                                ("consumers", args.consumers)) if v is not None}
    for item in args.param:
        key, sep, value = item.partition("=")
        if not sep or not value.lstrip("-").isdigit():
            sys.stderr.write(f"capture: --param {item!r}: expected NAME=INTEGER\n")
            return 2
        params[key] = int(value)
    out = Path(args.out)
    cap = GenCapture(out.stem, pipeline, params, [b for b in args.bugs.split(",") if b],
                     ctas=args.ctas, timeout_us=args.timeout_us, flush_before_arrive=True)
    try:
        cuda = plan(cap).cuda
    except KeyError:
        sys.stderr.write(f"capture: {args.scenario!r} is neither a built-in scenario nor a "
                         ".pipe file\n")
        return 2
    except (CodegenError, ParamError, PipelineError) as exc:
        sys.stderr.write(f"capture: {exc}\n")
        return 2
    raw = capture(cap)
    if args.raw:
        raw_path = Path(args.raw)
        write_json(raw_path, raw)
        raw_path.with_name(f"{out.stem}.cu").write_text(cuda)
    error = raw.get("error")
    if error and not raw.get("records"):
        sys.stderr.write(f"capture: nothing was logged: {error.get('name')}: "
                         f"{error.get('message')}\n")
        return 1
    state = replay(raw)
    doc = document(state)
    write_json(out, doc)
    report = doc["source"]["conformance"]
    verdict = "matches" if report["matches"] else \
        f"DIVERGES at step {report['first_divergence']['step']}: " \
        f"{report['first_divergence']['why']}"
    sys.stdout.write(f"{report['status']['gpu']} on the GPU, {doc['status']} in the engine: "
                     f"{doc['total_steps']} steps, {len(doc['diagnostics'])} diagnostics; "
                     f"replayed in the GPU's order, the engine {verdict}; wrote {out}\n")
    return 0


def main(argv: list[str] | None = None) -> int:
    """Stand-alone entry (`python -m app.capture.cli ...`) until app/cli.py wires it in."""
    parser = argparse.ArgumentParser(prog="mbarrier-inspector")
    sub = parser.add_subparsers(dest="command", required=True)
    add_parser(sub)
    args = parser.parse_args(argv)
    return args.run(args)


if __name__ == "__main__":
    sys.exit(main())
