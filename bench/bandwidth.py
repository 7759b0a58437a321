"""Bandwidth of the TMA ring beside cudaMemcpy on one GPU: the hand-written reference kernel and the
kernel generated from app/capture/pipelines/bandwidth_ring.pipe with its log compiled out.

    python bench/bandwidth.py                 # print the table of the shipped traces/bandwidth.json
    python bench/bandwidth.py --run           # measure again on this machine's GPU (CuPy), print
    python bench/bandwidth.py --run --write   # ... and replace traces/bandwidth.json

GB/s counts bytes read plus bytes written, as a device-to-device copy moves both.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

SHIPPED = ROOT / "traces" / "bandwidth.json"


def table(doc: dict) -> str:
    """Rows: stages; columns: tile size and release lag; the best cell and memcpy below."""
    rows = doc["results"]
    sizes = sorted({r["tile_bytes"] for r in rows})
    lags = sorted({r["release_lag"] for r in rows})
    cols = [(size, lag) for size in sizes for lag in lags]
    head = "stages " + "".join(f"{size // 1024:>5d} KiB lag {lag}" for size, lag in cols)
    lines = [head]
    for stages in sorted({r["stages"] for r in rows}):
        cells = []
        for size, lag in cols:
            hit = [r for r in rows if (r["tile_bytes"], r["stages"], r["release_lag"])
                   == (size, stages, lag)]
            if not hit:
                cells.append(f"{'':>15s}")
            elif not hit[0]["fits"]:
                cells.append(f"{'(no smem)':>15s}")
            else:
                cells.append(f"{hit[0]['gbps']:>15,.0f}")
        lines.append(f"{stages:>6d} " + "".join(cells))
    best = doc["best"]
    lines.append(f"cudaMemcpy D2D: {doc['memcpy']['gbps']:,.0f} GB/s; best ring: "
                 f"{best['gbps']:,.0f} GB/s ({best['stages']} stages x "
                 f"{best['tile_bytes'] // 1024} KiB, lag {best['release_lag']}) = "
                 f"{100 * doc['best_fraction_of_memcpy']:.1f}% of memcpy")
    gen = doc.get("generated") or {}
    if gen.get("best"):
        g = gen["best"]
        per = {(r["tile_bytes"], r["stages"]): r["gbps"] for r in gen["results"] if r["gbps"]}
        lines.append("generated (log compiled out), GB/s by stages: " + "; ".join(
            f"{size // 1024} KiB " + " ".join(f"{per.get((size, s), 0):,.0f}"
                                             for s in sorted({r['stages'] for r in rows}))
            for size in sizes))
        lines.append(f"best generated: {g['gbps']:,.0f} GB/s ({g['stages']} stages x "
                     f"{g['tile_bytes'] // 1024} KiB) = "
                     f"{100 * gen['best_fraction_of_reference']:.1f}% of the best reference")
    src = doc["source"]
    lines.append(f"{src.get('device')}, driver {src.get('driver')}, CUDA {src.get('cuda')}, "
                 f"{doc['bytes_read'] / 2**30:.0f} GiB read + {doc['bytes_written'] / 2**30:.0f} "
                 f"GiB written, captured {src.get('captured_at')}")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run", action="store_true", help="measure on this GPU")
    parser.add_argument("--write", action="store_true", help="with --run: update the shipped file")
    args = parser.parse_args()
    if args.run:
        from app.capture.bandwidth import bandwidth

        doc = bandwidth()
        if args.write:
            SHIPPED.write_text(json.dumps(doc, separators=(",", ":")) + "\n")
    else:
        doc = json.loads(SHIPPED.read_text())
    print(table(doc))
    return 0


if __name__ == "__main__":
    sys.exit(main())
