"""A Promela model of `double_buffer_tma` (app/scenarios/double_buffer_tma.pipe) for SPIN, and a
runner that times `spin -a`, `gcc -O2 -DSAFETY` and `./pan -m100000` on it (bench/check.py
prints the result beside the checker's).

The model follows docs/engine.md's moves: the producer's and each consumer's lines are atomic
steps; the TMA engine is one process whose alternatives are one chunk landing of each in-flight
load (applying its complete-tx, or holding it where the engine offers a hold) and one chunk read
of each in-flight store. Barriers count completed phases (`parity = phase % 2`), and tx may go
negative. Diagnostics are assertions (`stale_wait`, `partial_read` / `stale_read`, `overwrite`,
`tx_mismatch` on the short side, `over_arrival`, `reuse_before_wait`); `deadlock` is pan's
invalid end state. SPIN stops at the first error, so it answers the verdict only.

    python bench/spin/ring.py --stages 4 --tiles 8 --consumers 2 [--bug NAME] > ring.pml
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BUGS = ("forget_phase_toggle", "forget_producer_phase_toggle", "expect_tx_short",
        "expect_tx_long", "consumer_skips_release", "producer_skips_empty_wait",
        "wrong_arrival_count")


def promela(stages: int, tiles: int, consumers: int, bug: str | None = None,
            tile_bytes: int = 2048, chunk_bytes: int = 1024) -> str:
    """The Promela text of one configuration."""
    if bug is not None and bug not in BUGS:
        raise ValueError(f"unknown toggle {bug!r}")
    S, T, K, C = stages, tiles, consumers, tile_bytes // chunk_bytes
    announce = tile_bytes + {"expect_tx_short": -1024, "expect_tx_long": 1024}.get(bug, 0)
    empty_count = 1 if bug == "wrong_arrival_count" else K
    all_mask = (1 << K) - 1
    out = [f"/* double_buffer_tma stages={S} tiles={T} consumers={K} tile_bytes={tile_bytes} "
           f"chunk_bytes={chunk_bytes} bug={bug} */",
           f"#define S {S}", f"#define T {T}", f"#define K {K}", f"#define C {C}",
           f"#define CB {chunk_bytes}", f"#define TB {tile_bytes}", f"#define ANNOUNCE {announce}",
           f"#define EMPTY_COUNT {empty_count}",
           "byte full_phase[S]; byte full_pending[S]; int full_tx[S]; int held[S];",
           "bool full_observed[S];",
           "byte empty_phase[S]; byte empty_pending[S]; bool empty_observed[S];",
           "byte chunk_tile[S * C];  /* tile + 1 that wrote the chunk; 0: never written */",
           "byte owed[T];            /* consumers that have not released tile k's stage */",
           "byte ld_next[T]; bool ld_active[T];",
           "byte st_next[K]; bool st_active[K];",
           "",
           "inline full_complete(s) {",
           "  if :: full_pending[s] == 0 && full_tx[s] == 0 ->",
           "       full_phase[s]++; full_pending[s] = 1; full_observed[s] = 0",
           "     :: else -> skip fi }",
           "inline empty_complete(s) {",
           "  if :: empty_pending[s] == 0 ->",
           "       empty_phase[s]++; empty_pending[s] = EMPTY_COUNT; empty_observed[s] = 0",
           "     :: else -> skip fi }",
           ""]
    # The producer.
    wait = ("" if bug == "producer_skips_empty_wait" else
            "    atomic { (empty_phase[s] % 2 != pp) -> "
            "assert(empty_phase[s] >= k / S); empty_observed[s] = 1 };  /* stale_wait */\n")
    pp = "1" if bug == "forget_producer_phase_toggle" else "((k / S) % 2) ^ 1"
    out.append(f"""proctype producer() {{
  byte k = 0; byte s; byte pp;
  do
  :: k < T ->
    s = k % S; pp = {pp};
{wait}    atomic {{ assert(full_pending[s] > 0);                         /* over_arrival */
             assert(full_observed[s] || full_phase[s] == 0);        /* reuse_before_wait */
             full_tx[s] = full_tx[s] + ANNOUNCE; full_pending[s]--; full_complete(s) }};
    atomic {{ assert(ANNOUNCE >= TB);                                /* tx_mismatch */
             ld_next[k] = 0; ld_active[k] = 1; owed[k] = {all_mask} }};
    k++
  :: else -> break
  od
}}
""")
    # The consumers.
    cp = "0" if bug == "forget_phase_toggle" else "(k / S) % 2"
    reads = " && ".join(f"chunk_tile[s * C + {c}] == k + 1" for c in range(C))
    clear = "\n".join(f"             if :: {t} % S == s -> owed[{t}] = owed[{t}] & ~(1 << c)"
                      " :: else -> skip fi;" for t in range(T))
    release = ("" if bug == "consumer_skips_release" else
               f"""    atomic {{ assert(empty_pending[s] > 0);               /* over_arrival */
             assert(empty_observed[s] || empty_phase[s] == 0);     /* reuse_before_wait */
{clear}
             empty_pending[s]--; empty_complete(s) }};
""")
    out.append(f"""proctype consumer(byte c) {{
  byte k = 0; byte s; byte cp;
  do
  :: k < T ->
    s = k % S; cp = {cp};
    atomic {{ (full_phase[s] % 2 != cp) ->
             assert(full_phase[s] >= k / S + 1); full_observed[s] = 1 }};  /* stale_wait */
    assert({reads});   /* partial_read, stale_read */
    atomic {{ st_next[c] = 0; st_active[c] = 1 }};
    atomic {{ st_next[c] == C -> st_active[c] = 0 }};   /* commit_group; wait_group.read 0 */
{release}    k++
  :: else -> break
  od
}}
""")
    # The TMA engine: one alternative per in-flight copy and per hold.
    alts = []
    for k in range(T):
        s = k % S
        others = " || ".join(f"ld_active[{j}]" for j in range(T) if j != k and j % S == s) or "0"
        land = (f"if :: chunk_tile[{s} * C + ld_next[{k}]] != 0 && "
                f"chunk_tile[{s} * C + ld_next[{k}]] != {k + 1} -> "
                f"assert(owed[chunk_tile[{s} * C + ld_next[{k}]] - 1] == 0)  /* overwrite */ "
                f":: else -> skip fi; chunk_tile[{s} * C + ld_next[{k}]] = {k + 1}; "
                f"ld_next[{k}]++; if :: ld_next[{k}] == C -> ld_active[{k}] = 0 "
                f":: else -> skip fi")
        alts.append(f"  :: atomic {{ ld_active[{k}] -> {land}; "
                    f"full_tx[{s}] = full_tx[{s}] - held[{s}] - CB; held[{s}] = 0; "
                    f"full_complete({s}) }}")
        alts.append(f"  :: atomic {{ ld_active[{k}] && full_tx[{s}] - held[{s}] - CB <= 0 && "
                    f"(ld_next[{k}] + 1 < C || {others}) -> {land}; held[{s}] = held[{s}] + CB }}")
    for c in range(K):
        alts.append(f"  :: atomic {{ st_active[{c}] && st_next[{c}] < C -> st_next[{c}]++ }}")
    out.append("proctype tma() {\nend:\n  do\n" + "\n".join(alts) + "\n  od\n}\n")
    starts = "; ".join(["run producer()", *(f"run consumer({c})" for c in range(K)),
                        "run tma()"])
    out.append(f"""init {{
  byte i;
  atomic {{
    for (i : 0 .. S - 1) {{ full_pending[i] = 1; empty_pending[i] = EMPTY_COUNT }};
    {starts}
  }}
}}
""")
    return "\n".join(out)


def run_spin(text: str, max_depth: int = 100_000, keep: Path | None = None) -> dict:
    """Time `spin -a`, `gcc -O2 -DSAFETY` and `./pan -m<max_depth>` on `text`.

    Returns {"verdict": "safe" | "unsafe", "states", "generate_s", "compile_s", "search_s",
    "total_s", "error"} (`error`: pan's first error line). Raises FileNotFoundError when spin
    or gcc is missing."""
    for tool in ("spin", "gcc"):
        if shutil.which(tool) is None:
            raise FileNotFoundError(tool)
    with tempfile.TemporaryDirectory(prefix="mbi-spin-") as tmp:
        work = Path(keep) if keep else Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        (work / "ring.pml").write_text(text)
        start = time.perf_counter()
        subprocess.run(["spin", "-a", "ring.pml"], cwd=work, check=True, capture_output=True)
        generated = time.perf_counter()
        subprocess.run(["gcc", "-O2", "-DSAFETY", "-o", "pan", "pan.c"], cwd=work, check=True,
                       capture_output=True)
        compiled = time.perf_counter()
        pan = subprocess.run(["./pan", f"-m{max_depth}"], cwd=work, capture_output=True,
                             text=True)
        done = time.perf_counter()
    report = pan.stdout
    states = re.search(r"(\d+) states, stored", report)
    errors = re.search(r"errors: (\d+)", report)
    first_error = next((line.strip() for line in report.splitlines()
                        if line.startswith("pan:") and ("violated" in line
                                                        or "invalid end state" in line)), None)
    return {"verdict": "unsafe" if errors and int(errors.group(1)) else "safe",
            "states": int(states.group(1)) if states else None,
            "generate_s": generated - start, "compile_s": compiled - generated,
            "search_s": done - compiled, "total_s": done - start, "error": first_error,
            "depth_limited": "max search depth too small" in report}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stages", type=int, default=2)
    parser.add_argument("--tiles", type=int, default=4)
    parser.add_argument("--consumers", type=int, default=1)
    parser.add_argument("--bug", choices=BUGS)
    parser.add_argument("--run", action="store_true", help="run spin and print its verdict")
    args = parser.parse_args()
    text = promela(args.stages, args.tiles, args.consumers, args.bug)
    if args.run:
        sys.stdout.write(f"{run_spin(text)}\n")
    else:
        sys.stdout.write(text)


if __name__ == "__main__":
    main()
