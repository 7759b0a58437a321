"""Probes of the tx-count on a real Hopper GPU: what the hardware does where the model's answer
rests on docs/semantics.md alone (bytes landing before their `expect_tx`, more or fewer bytes than
announced, a barrier reused before anyone waited on its phase).

Two kinds, both in `traces/probes.json`:

- `probes`: one thread drives one mbarrier through one small program, once, each launch in a
  process of its own (a trap loses the context); whether the phase completed, the parity after.
- `scale`: the same questions asked 132 CTAs x 1,000 phases at once (one CTA per SM, the barrier
  re-initialized each phase), counting how often a phase completed with every byte, completed
  early (before the last bytes' complete-tx: a reader may find the tile partly written) or
  never (the count stepped over zero: a hang). Beside each row, `model` says which of those the
  schedule checker finds reachable in the same program written in the pipeline language
  (`--model-only` computes it on a machine without a GPU). Announcing N bytes for one 4,096-byte
  copy, for N down to 16, shows the size of the pieces in which a copy's bytes reach the
  tx-count (`granularity`); `reuse_before_wait` races a waiter against two back-to-back phases.

    python -m app.capture.probes --out traces/probes.json          # on a GPU machine
    python -m app.capture.probes --out traces/probes.json --model-only

This module runs the probes and writes the file; what the probes are and what the model says
of them is `probe_models`, their CUDA text `probe_kernels`, the runs on the GPU `probe_gpu`, and
the file's parts `probe_doc`. None imports the web layer, so a GPU machine without it runs them.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

from .probe_doc import _exit_doc, _no_complete_doc, _scale_doc
from .probe_gpu import run_exit, run_no_complete, run_probe, run_scale
from .probe_models import (  # noqa: F401 - the probes' tables and models: this module's API
    DIFFERENCES,
    EXIT,
    EXIT_CLUSTERS,
    EXIT_LAUNCHES,
    NO_COMPLETE,
    PROBES,
    exit_pipeline,
    model,
    no_complete_pipeline,
    pending_count_model,
    program_model,
)

SECTIONS = ("probes", "scale", "no_complete", "remote_after_exit")
"""What `--only` can measure again: the one-thread tx probes, the rows at scale (with the piece
sizes and reuse before a wait), the `.noComplete` probes, the CTA-lifetime probes."""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="app.capture.probes", description=__doc__)
    parser.add_argument("--out", type=Path, default=Path("traces/probes.json"))
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--model-only", action="store_true",
                        help="recompute the checker's `model` columns of --out (no GPU)")
    parser.add_argument("--only", default="",
                        help=f"comma-separated sections to measure again ({', '.join(SECTIONS)});"
                             " the others keep --out's figures")
    parser.add_argument("--launches", type=int, default=EXIT_LAUNCHES,
                        help="launches of each remote_after_exit variant")
    args = parser.parse_args(argv)
    if args.child:
        kind, _, rest = args.child.partition(":")
        if kind == "nc":
            result = run_no_complete(rest)
        elif kind == "exit":
            probe, _, launches = rest.partition(":")
            result = run_exit(probe, int(launches))
        elif kind == "device":
            from app.capture.device import device_info

            result = device_info()
        else:
            result = run_scale() if args.child == "scale" else run_probe(args.child)
        sys.stdout.write(json.dumps(result) + "\n")
        sys.stdout.flush()
        os._exit(0)
    previous = json.loads(args.out.read_text()) if args.out.exists() else None
    only = [s for s in args.only.split(",") if s] or list(SECTIONS)
    unknown = [s for s in only if s not in SECTIONS]
    if unknown:
        parser.error(f"unknown section(s): {', '.join(unknown)}")
    if args.model_only:
        if previous is None:
            parser.error(f"{args.out} does not exist")
        doc = {**previous, **_scale_doc(None, previous)}
        doc.update(_no_complete_doc(None, previous))
        doc.update(_exit_doc(None, previous))
        doc["version"] = VERSION
        args.out.write_text(json.dumps(doc, indent=1) + "\n")
        return 0
    doc = dict(previous or {})
    doc.update({"format": "mbarrier-inspector/tx-probes", "version": VERSION})
    if "probes" in only:
        doc["probes"] = [_child(mode) or {"probe": mode, "program": PROBES[mode],
                                          "error": "no result"} for mode in PROBES]
    if "scale" in only:
        doc.update(_scale_doc(_child("scale"), None))
    if "no_complete" in only:
        rows = [_child(f"nc:{probe}") or {"probe": probe, "program": NO_COMPLETE[probe][2],
                                          "error": {"name": "no_result", "message": ""}}
                for probe in NO_COMPLETE]
        doc.update(_no_complete_doc(rows, None))
    if "remote_after_exit" in only:
        doc.update(_exit_doc([_exit_runs(probe, args.launches) for probe in EXIT], None))
    doc["device"] = _device()
    args.out.write_text(json.dumps(doc, indent=1) + "\n")
    return 0


VERSION = 3
"""Version 3 adds `no_complete` and `remote_after_exit` to version 2's parts (unchanged)."""


def _device() -> dict:
    out = _child("device")
    return out or {}


def _exit_runs(probe: str, launches: int) -> dict:
    """A variant's launches, each process running until one fails: a trap ends a process, so
    the next launch starts a fresh one (at most `launches` processes)."""
    runs: list[dict] = []
    for _ in range(launches):
        if len(runs) >= launches:
            break
        result = _child(f"exit:{probe}:{launches - len(runs)}")
        if result is None:
            runs.append({"ending": "trapped", "error": {"name": "no_result",
                                                        "message": "the process died"},
                         "clusters": EXIT_CLUSTERS})
            continue
        runs.extend(result["runs"])
        if any(r["ending"] == "hung" for r in result["runs"]):
            break  # a launch that never finished: no more of this variant
    return {"probe": probe, "runs": runs[:launches]}


def _child(mode: str) -> dict | None:
    """One measurement in a process of its own (a trap ends its CUDA context, not ours)."""
    try:
        proc = subprocess.run([sys.executable, "-m", "app.capture.probes", "--child", mode],
                              capture_output=True, text=True, timeout=300)
    except subprocess.TimeoutExpired:
        sys.stderr.write(f"probe {mode}: the process ran past 300 s\n")
        return None
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    if not lines:
        sys.stderr.write(f"probe {mode}: no result (exit {proc.returncode}): "
                         f"{proc.stderr[-500:]}\n")
        return None
    sys.stderr.write(f"probe {mode}: {lines[-1]}\n")  # the measurement, whatever comes next
    return json.loads(lines[-1])


if __name__ == "__main__":
    sys.exit(main())
