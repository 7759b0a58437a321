"""Benchmark of the schedule checker beside SPIN: time to verdict, states and states per second on
double_buffer_tma (tile_bytes 2048, chunk_bytes 1024), and SPIN's verdict, stored states and total
time (the export + `spin -a` + `gcc -O2 -DSAFETY` + `MBI_QUERY=255 ./pan -m1000000`) on the
exported Promela model (app/check/promela.py: the engine's moves and states), measured in the
same run.

    .venv/bin/python bench/check.py --suite         # issue 19's table: the ring, cluster_multicast
                                                    # S1-4 x T1-8, the CUTLASS WS pipelines
                                                    # (bench/pipelines/), beside SPIN, bounded by
                                                    # --cap-states, --cap-s and --budget
    .venv/bin/python bench/check.py --suite --only cluster   # those rows only

    .venv/bin/python bench/check.py                 # issue 12's table and the S2 T4 toggles
    .venv/bin/python bench/check.py --grid full     # stages 1-4 x tiles 1-8 x consumers 1-4 x
                                                    # every toggle and none (1,024 rows), with
                                                    # progress on stderr and a summary
    .venv/bin/python bench/check.py --grid full --slice 0/8 > part0.txt   # an eighth
    .venv/bin/python bench/check.py --summarize part*.txt                 # one summary
    .venv/bin/python bench/check.py --config 4,8,4 --config 2,4,2,forget_phase_toggle
    .venv/bin/python bench/check.py --repeat 3      # best and median of three checker runs
    .venv/bin/python bench/check.py --no-spin       # the checker alone
    .venv/bin/python bench/check.py --unreduced     # also the plain breadth-first search
    .venv/bin/python bench/check.py --stop-at-first # answer at the first shortest violation
    .venv/bin/python bench/check.py --clusters --unreduced  # cluster_multicast and CUTLASS's
                                                    # WS test, partial-order reduction on/off
    .venv/bin/python bench/check.py --poll          # what the livelock analysis costs: a ring
                                                    # whose consumers poll in `while` loops

`verdict s`: when the verdict was known, counted from the pipeline's compile (as SPIN's total
counts `spin -a` and gcc). For a safe row that is the whole search; for an unsafe row it is the
first violation found (from then on the answer is `unsafe` even if a limit stops the search: a
client asking with a shorter `timeout_s` gets it then). `answer s`: the whole answer as
`check_config` builds it (the search to its end or its limit, `--timeout`, plus every
counterexample's trace document); `*` marks a search a limit stopped. With `--stop-at-first`
(implied by `--grid full`) the search stops once one kind's shortest counterexample is known, as
a client asking `stop_at_first` gets it, and `verdict s` is that whole answer, its trace
included (`--summarize` reads such a table the same way).
`states/s` divides the stored states (after the reductions) by the search time. SPIN stops at its
first error, as the verdict column does. Without `spin` or `gcc` on PATH the SPIN columns say
`skipped`.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from app.check.engine import Explorer, Limits  # noqa: E402
from app.check.promela import ANY, MAX_OPS, Exporter  # noqa: E402
from app.check.service import violation  # noqa: E402
from app.scenarios import from_source, get  # noqa: E402

PIPELINES = Path(__file__).resolve().parent / "pipelines"
SPIN_A = ["spin", "-a", "model.pml"]
GCC = ["gcc", "-O2", "-DSAFETY", "-DVECTORSZ=65536", "-DMEMLIM=4096", "-w", "-o", "pan",
       "pan.c"]
PAN = ["./pan", "-m1000000"]
SPIN_FLAGS = (f"SPIN: {' '.join(SPIN_A)}; {' '.join(GCC)}; MBI_QUERY={ANY} {' '.join(PAN)} "
              "(every kind's assertions armed, deadlock as an invalid end state; pan stops at "
              "its first error)")

SCENARIO = "double_buffer_tma"
TOGGLES = (None, "forget_phase_toggle", "forget_producer_phase_toggle", "expect_tx_short",
           "expect_tx_long", "consumer_skips_release", "producer_skips_empty_wait",
           "wrong_arrival_count")
ISSUE_TABLE = [(4, 8, 2, None), (4, 16, 2, None), (3, 8, 3, None), (4, 8, 4, None),
               (4, 8, 4, "forget_phase_toggle")]


def checker(stages: int, tiles: int, consumers: int, bug: str | None, reduce: bool,
            repeat: int, timeout: float, stop_at_first: bool = False) -> dict:
    """What `check_config` does (compile, search, then one trace per kind), timed in its parts."""
    scenario = get(SCENARIO)
    verdicts, answers, rates = [], [], []
    for _ in range(repeat):
        start = time.perf_counter()
        cfg = scenario.resolve({"stages": stages, "tiles": tiles, "consumers": consumers,
                                "tile_bytes": 2048, "chunk_bytes": 1024}, [bug] if bug else [])
        describe = scenario.describe(cfg)
        explorer = Explorer(cfg, reduce)
        begun = time.perf_counter() - start
        out = explorer.explore(Limits(max_states=2_000_000, timeout_s=timeout,
                                      stop_at_first=stop_at_first))
        for kind in out.found:
            violation(explorer, out, kind, describe)
        answers.append(time.perf_counter() - start)
        if stop_at_first:  # the client has its answer, counterexample and trace included
            verdicts.append(answers[-1])
        else:
            verdicts.append(begun + (out.first_found_s if out.found else out.elapsed_s))
        rates.append(out.states / max(out.elapsed_s, 1e-9))
        del explorer
    limited = not out.complete and out.stopped_by != "first_violation"
    verdict = out.verdict + ("*" if limited else "")
    return {"verdict": verdict, "states": out.states, "best": min(verdicts),
            "median": statistics.median(verdicts), "answer": min(answers), "rate": max(rates),
            "search_s": out.elapsed_s}


CLUSTER_ROWS = [
    ("cluster_multicast", {"stages": 1, "tiles": 2}, []),
    ("cluster_multicast", {"stages": 2, "tiles": 2}, []),
    ("cluster_multicast", {}, []),                          # the defaults: stages 2, tiles 4
    ("cluster_multicast", {"stages": 3, "tiles": 6}, []),
    ("cluster_multicast", {"stages": 2, "tiles": 4}, ["release_local_only"]),
    ("cluster_multicast", {"stages": 2, "tiles": 4}, ["no_producer_tail"]),
    ("ws_2x1", {"stages": 2, "iterations": 8}, []),
    ("ws_2x1", {"stages": 7, "iterations": 8}, []),
    ("ws_2x2", {"stages": 2, "iterations": 3}, []),
    ("ws_4x1", {"stages": 2, "iterations": 3}, []),
    ("ws_2x2", {"stages": 7, "iterations": 8}, []),
    ("ws_4x1", {"stages": 7, "iterations": 8}, []),
]
"""Cluster rows (`--clusters`): the built-in scenario and CUTLASS's warp-specialized test
(bench/pipelines/), with the partial-order reduction and without it."""


def clusters(timeout: float, max_states: int, unreduced: bool) -> None:
    """Each cluster row with the partial-order reduction (`por`) and without it (`old`), each
    search bounded by `timeout` and `max_states`; the whole answer (traces included) timed, in
    wall-clock and CPU seconds (`states/s` per CPU second: the shared cores of the development
    machine run at loads of 10-20)."""
    from app.check.service import check_config
    from app.scenarios import from_source

    pipelines = Path(__file__).resolve().parent / "pipelines"
    print(f"cluster rows (python {sys.version.split()[0]}); limits {max_states:,} states, "
          f"{timeout:g} s; * = a limit stopped the search")
    header = (f"{'configuration':<44} {'mode':<4} {'verdict':<9} {'states':>9} "
              f"{'por states':>10} {'answer s':>8} {'cpu s':>7} {'states/s':>9}")
    print(header)
    print("-" * len(header))
    limits = Limits(max_states=max_states, timeout_s=timeout)
    for name, params, bugs in CLUSTER_ROWS:
        if name.startswith("ws_"):
            scenario = from_source((pipelines / f"{name}.pipe").read_text())
        else:
            scenario = get(name)
        for mode in ("por", "old") if unreduced else ("por",):
            start, cpu = time.perf_counter(), time.process_time()
            cfg = scenario.resolve(params, bugs)
            answer = check_config(scenario, cfg, limits, por=mode == "por")
            took, cpu = time.perf_counter() - start, time.process_time() - cpu
            star = "" if answer["complete"] or answer["stopped_by"] is None else "*"
            what = (f"{name} " + " ".join(f"{k[0].upper()}{v}" for k, v in params.items())
                    + (f" {','.join(bugs)}" if bugs else ""))
            por_states = answer.get("persistent_states")
            print(f"{what:<44} {mode:<4} {answer['verdict'] + star:<9} "
                  f"{answer['states_explored']:>9,} "
                  f"{por_states if por_states is not None else '-':>10} {took:>8.2f} "
                  f"{cpu:>7.2f} {answer['states_explored'] / max(cpu, 1e-9):>9,.0f}",
                  flush=True)


def spin(stages: int, tiles: int, consumers: int, bug: str | None) -> dict | None:
    if shutil.which("spin") is None or shutil.which("gcc") is None:
        return None
    cfg = get(SCENARIO).resolve({"stages": stages, "tiles": tiles, "consumers": consumers,
                                 "tile_bytes": 2048, "chunk_bytes": 1024}, [bug] if bug else [])
    return run_spin(cfg)


def _timed(cmd: list[str], cwd: Path, env: dict | None = None, timeout: float | None = None):
    """Run `cmd`: (output, seconds, 0.0, timed out)."""
    start = time.perf_counter()
    try:
        proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=timeout,
                              env={**os.environ, **(env or {})}, check=False)
        out, late = proc.stdout + proc.stderr, False
    except subprocess.TimeoutExpired as err:
        out, late = (err.stdout or b"").decode() if isinstance(err.stdout, bytes) else "", True
    return out, time.perf_counter() - start, 0.0, late


def run_spin(cfg, timeout: float = 600.0) -> dict:
    """`spin -a`, `gcc -O2 -DSAFETY` and pan on the exported model (app/check/promela.py), timed
    apart; the table of copies in flight is doubled until pan has room."""
    ops = Exporter(cfg).max_ops
    with tempfile.TemporaryDirectory(prefix="mbi-spin-") as tmp:
        work = Path(tmp)
        while True:
            start = time.perf_counter()
            (work / "model.pml").write_text(Exporter(cfg, ops).export().text)
            exported = time.perf_counter() - start
            _, generate_s, _, _ = _timed(SPIN_A, work)
            _, compile_s, _, _ = _timed(GCC, work)
            out, search_s, rss, late = _timed(PAN, work, {"MBI_QUERY": str(ANY)}, timeout)
            if "assertion violated (NOPS<" in out and ops < MAX_OPS:
                ops = min(MAX_OPS, 2 * ops)
                continue
            break
    states = re.search(r"(\d+) states, stored", out)
    errors = re.search(r"errors: (\d+)", out)
    rss_line = re.search(r"([\d.]+)\s+total actual memory usage", out)
    first_error = next((line.strip() for line in out.splitlines()
                        if line.startswith("pan:") and ("violated" in line
                                                        or "invalid end state" in line)), None)
    limited = late or any(x in out for x in ("max search depth too small", "out of memory",
                                             "reached -DMEMLIM"))
    verdict = "unsafe" if errors and int(errors.group(1)) else (
        "timeout" if late else "limit" if limited else "safe")
    total = exported + generate_s + compile_s + search_s
    return {"verdict": verdict, "states": int(states.group(1)) if states else 0,
            "generate_s": exported + generate_s, "compile_s": compile_s, "search_s": search_s,
            "total_s": total, "error": first_error, "limited": limited,
            "rss_mb": float(rss_line.group(1)) if rss_line else rss}


STOP_NOTE = "each search stops at its first shortest violation"
HEADER = (f"{'S':>1} {'T':>2} {'K':>1} {'toggle':<28} {'mode':<8} {'verdict':<9} "
          f"{'states':>9} {'verdict s':>9} {'median':>7} {'answer s':>8} {'states/s':>9} | "
          f"{'spin':<6} {'spin states':>11} {'spin s':>7} {'agree':>5} {'faster':>6}")


def parse_row(line: str) -> dict | None:
    """A reduced row of this table, read back (for `--summarize`); None for any other line."""
    if "|" not in line or not line[:1].isdigit():
        return None
    left, right = line.split("|", 1)
    f, g = left.split(), right.split()
    if f[4] != "reduced":
        return None
    row = {"config": " ".join(f[:4]), "verdict": f[5].rstrip("*"),
           "states": int(f[6].replace(",", "")),
           "verdict_s": float(f[7]), "answer_s": float(f[9]),
           "rate": float(f[10].replace(",", "")), "spin": None}
    if g and g[0] != "skipped":
        row["spin"] = {"verdict": g[0], "states": int(g[1].replace(",", "")),
                       "total_s": float(g[2]), "agree": g[3] == "yes", "faster": g[4] == "yes"}
    return row


def summarize(rows: list[dict]) -> str:
    """Rows, states/s, rows faster than SPIN, verdict agreements and the worst margin."""
    states = sum(r["states"] for r in rows)
    seconds = sum(r["states"] / max(r["rate"], 1e-9) for r in rows)
    text = (f"reduced search: {len(rows)} configurations, {states:,} states in {seconds:.2f} s "
            f"of search ({states / max(seconds, 1e-9):,.0f} states/s), "
            f"{sum(r['verdict_s'] for r in rows):.2f} s to all verdicts")
    compared = [r for r in rows if r["spin"]]
    if compared:
        worst = max(compared, key=lambda r: r["verdict_s"] / max(r["spin"]["total_s"], 1e-9))
        ratio = worst["verdict_s"] / max(worst["spin"]["total_s"], 1e-9)
        slow = [r["config"] for r in compared if not r["spin"]["faster"]]
        wrong = [r["config"] for r in compared if not r["spin"]["agree"]]
        text += (f"\nSPIN compared on {len(compared)} rows: verdicts agree on "
                 f"{len(compared) - len(wrong)}, the checker is faster on "
                 f"{len(compared) - len(slow)}; worst margin: {worst['config']} "
                 f"{worst['verdict_s']:.3f} s against SPIN's {worst['spin']['total_s']:.2f} s "
                 f"({ratio:.3f} of SPIN's time); SPIN's total "
                 f"{sum(r['spin']['total_s'] for r in compared):.1f} s")
        if slow:
            text += "\nslower than SPIN: " + "; ".join(slow)
        if wrong:
            text += "\nverdicts differ: " + "; ".join(wrong)
    return text


# ------------------------------------------------------------------ issue 19: beside SPIN

def suite_rows(ring: str) -> list[tuple]:
    """(family, label, scenario loader, params, bugs): CUTLASS's warp-specialized test
    (bench/pipelines/) 1x1 stages 2/5/10, 2x1, 2x2 and 4x1 stages 2/7, iterations 1/2/4/8;
    cluster_multicast stages 1-4 x tiles 1-8; the ring. Within a family rows grow, so the
    first row past a cap skips the rest of it."""
    ring_rows = ([(s, t, k, None) for s in range(1, 5) for t in range(1, 9)
                  for k in range(1, 5)] if ring == "correct" else
                 ISSUE_TABLE + [(2, 4, k, bug) for k in (1, 2) for bug in TOGGLES])
    rows = []
    for name, stages in (("ws_1x1", (2, 5, 10)), ("ws_2x1", (2, 7)), ("ws_2x2", (2, 7)),
                         ("ws_4x1", (2, 7))):
        for s in stages:
            for i in (1, 2, 4, 8):
                rows.append((f"{name} S{s}", f"{name} S{s} I{i}", name,
                             {"stages": s, "iterations": i}, []))
    for s in range(1, 5):
        for t in range(1, 9):
            rows.append((f"cluster S{s}", f"cluster_multicast S{s} T{t}", "cluster_multicast",
                         {"stages": s, "tiles": t}, []))
    for s, t, k, bug in ring_rows:
        rows.append((f"ring S{s} K{k} {bug}", f"ring S{s} T{t} K{k} {bug or 'correct'}",
                     SCENARIO, {"stages": s, "tiles": t, "consumers": k, "tile_bytes": 2048,
                                "chunk_bytes": 1024}, [bug] if bug else []))
    return rows


def load(name: str):
    if name.startswith("ws_"):
        return from_source((PIPELINES / f"{name}.pipe").read_text())
    return get(name)


def checker_child(name: str, params: dict, bugs: list, cap_states: int, cap_s: float) -> dict:
    """The checker on one row in a forked process (its peak RSS is its own): compile, search
    with `stop_at_first`, then the counterexample's trace, as a client asking gets it."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read)
        try:
            start = time.perf_counter()
            scenario = load(name)
            cfg = scenario.resolve(params, bugs)
            explorer = Explorer(cfg)
            out = explorer.explore(Limits(max_states=cap_states, timeout_s=cap_s,
                                          stop_at_first=True))
            for kind in out.found:
                violation(explorer, out, kind, scenario.describe(cfg))
            result = {"verdict": out.verdict, "complete": out.complete,
                      "stopped_by": out.stopped_by, "states": out.states,
                      "search_s": out.elapsed_s, "total_s": time.perf_counter() - start,
                      "kinds": sorted(out.found),
                      "workers": getattr(out, "workers", 1)}
        except Exception as err:  # noqa: BLE001 - reported on the row
            result = {"error": f"{type(err).__name__}: {err}"[:200]}
        os.write(write, json.dumps(result).encode())
        os._exit(0)
    os.close(write)
    chunks = []
    while True:
        chunk = os.read(read, 65536)
        if not chunk:
            break
        chunks.append(chunk)
    os.close(read)
    _, _, usage = os.wait4(pid, 0)
    result = json.loads(b"".join(chunks) or b'{"error": "no answer"}')
    result["rss_mb"] = usage.ru_maxrss / 1024
    return result


SUITE_HEADER = (f"{'configuration':<34} {'verdict':<13} {'states':>9} {'s':>7} "
                f"{'states/s':>9} {'RSS MB':>7} | {'spin':<8} {'states':>11} {'gen+cc s':>8} "
                f"{'search s':>8} {'total s':>7} {'states/s':>9} {'RSS MB':>7} {'first':>5}")


def _first(ours: dict, theirs: dict) -> str:
    """Who answered first; `-` where neither answered within the cap."""
    answered = (ours["verdict"] != "inconclusive", theirs["verdict"] in ("safe", "unsafe"))
    if not any(answered):
        return "-"
    if answered[0] and (not answered[1] or ours["total_s"] <= theirs["total_s"]):
        return "ours"
    return "spin"


def suite(ring: str, cap_states: int, cap_s: float, budget_s: float, use_spin: bool,
          only: str = "") -> None:
    """Issue 19's table: every row beside SPIN on the exported model, in one run, bounded.
    A row past the checker's cap skips the rest of its family; past SPIN's, the rest of the
    family runs the checker alone. `only`: the rows whose label starts so."""
    print(f"the checker: POST /api/v1/check's search (stop_at_first; its time counts the "
          f"compile and the counterexample's trace), at most {cap_states:,} states or "
          f"{cap_s:g} s a row; python {sys.version.split()[0]}")
    print(SPIN_FLAGS + f"; pan at most {cap_s:g} s a row")
    print(SUITE_HEADER)
    print("-" * len(SUITE_HEADER))
    capped: dict[str, str] = {}
    spin_capped: dict[str, str] = {}
    began = time.perf_counter()
    for family, label, name, params, bugs in suite_rows(ring):
        if only and not label.startswith(only):
            continue
        if family in capped:
            print(f"{label:<34} skipped: {capped[family]}")
            continue
        if time.perf_counter() - began > budget_s:
            print(f"{label:<34} skipped: the run's budget of {budget_s:g} s is spent")
            continue
        ours = checker_child(name, params, bugs, cap_states, cap_s)
        if "error" in ours:
            print(f"{label:<34} checker error: {ours['error']}")
            continue
        verdict = ours["verdict"] + ("" if ours["complete"] or ours["stopped_by"] ==
                                     "first_violation" else f" ({ours['stopped_by']})")
        line = (f"{label:<34} {verdict:<13} {ours['states']:>9,} {ours['total_s']:>7.2f} "
                f"{ours['states'] / max(ours['search_s'], 1e-9):>9,.0f} "
                f"{ours['rss_mb']:>7.0f} | ")
        theirs = None
        if family in spin_capped:
            line += f"skipped: {spin_capped[family]}"
        elif use_spin:
            theirs = run_spin(load(name).resolve(params, bugs), timeout=cap_s)
            line += (f"{theirs['verdict']:<8} {theirs['states']:>11,} "
                     f"{theirs['generate_s'] + theirs['compile_s']:>8.2f} "
                     f"{theirs['search_s']:>8.2f} {theirs['total_s']:>7.2f} "
                     f"{theirs['states'] / max(theirs['search_s'], 1e-9):>9,.0f} "
                     f"{theirs['rss_mb']:>7.0f} "
                     f"{_first(ours, theirs):>5}")
        else:
            line += "skipped"
        print(line, flush=True)
        if ours["verdict"] == "inconclusive":
            capped[family] = f"{label} reached the checker's cap"
        elif theirs is not None and theirs["verdict"] in ("timeout", "limit"):
            spin_capped[family] = f"{label} reached SPIN's cap"
    print(f"run: {time.perf_counter() - began:.0f} s")


POLL_ROWS = [({"stages": 2, "tiles": 4, "consumers": 2}, ()), ({"stages": 3, "tiles": 6,
             "consumers": 2}, ()), ({"stages": 2, "tiles": 6, "consumers": 3}, ()),
             ({"stages": 3, "tiles": 8, "consumers": 3}, ()),
             ({"stages": 3, "tiles": 6, "consumers": 2}, ("expect_tx_long",)),
             ({"stages": 2, "tiles": 6, "consumers": 3}, ("consumer_skips_release",))]


def poll(repeat: int) -> None:
    """The livelock analysis's cost where a program can cycle: tests/check/programs.py's
    polling ring, searched with its edges kept and analysed, and searched as if it could not
    cycle (no edges, no analysis: unsound, for the comparison only). CPU seconds, best of
    `repeat`."""
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "check"))
    from programs import RING_POLL, config  # noqa: E402 - a test fixture, not a package

    print("ring_poll (tests/check/programs.py): CPU s of the search, best of "
          f"{repeat}; analysed = edges kept + livelock analysis")
    for params, bugs in POLL_ROWS:
        cfg = config(RING_POLL, bugs, **params)
        best = {}
        for cyclic in (True, False):
            for _ in range(repeat):
                explorer = Explorer(cfg)
                explorer.cyclic = cyclic
                start = time.process_time()
                out = explorer.explore(Limits(max_states=2_000_000, timeout_s=600))
                took = time.process_time() - start
                if cyclic not in best or took < best[cyclic][0]:
                    best[cyclic] = (took, out)
        (ours, out), (plain, _) = best[True], best[False]
        label = " ".join(f"{'STK'['stages tiles consumers'.split().index(k)]}{v}"
                         for k, v in params.items())
        print(f"  {label} {','.join(bugs) or 'correct':<24} {out.verdict:<7} "
              f"{','.join(sorted(out.found)) or '-':<10} {out.states:>7,} states "
              f"{ours:7.3f} s analysed {plain:7.3f} s without "
              f"({ours / max(plain, 1e-9) - 1:+.0%})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--grid", nargs="?", const="full", choices=["full"],
                        help="the whole grid of issue 12 (implies --stop-at-first)")
    parser.add_argument("--slice", default="0/1", metavar="I/N",
                        help="run slice I of N (split the grid across processes)")
    parser.add_argument("--summarize", nargs="+", metavar="FILE",
                        help="read tables this script printed and print one summary")
    parser.add_argument("--config", action="append", default=[], metavar="S,T,K[,TOGGLE]")
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--timeout", type=float, default=60.0,
                        help="seconds each search may take (the API's largest limit: 60)")
    parser.add_argument("--stop-at-first", action="store_true",
                        help="stop each search at its first shortest violation")
    parser.add_argument("--no-spin", action="store_true")
    parser.add_argument("--unreduced", action="store_true",
                        help="also run the search without reductions (slow)")
    parser.add_argument("--poll", action="store_true",
                        help="what the livelock analysis costs on a ring that polls")
    parser.add_argument("--suite", nargs="?", const="default", choices=["default", "correct"],
                        help="issue 19's table beside SPIN: the ring (its issue-12 rows, or "
                             "`correct`: stages 1-4 x tiles 1-8 x consumers 1-4), "
                             "cluster_multicast S1-4 x T1-8, the CUTLASS WS pipelines")
    parser.add_argument("--cap-states", type=int, default=200_000,
                        help="--suite: the checker's state cap a row")
    parser.add_argument("--cap-s", type=float, default=60.0,
                        help="--suite: seconds a row may take on either side")
    parser.add_argument("--budget", type=float, default=1800.0,
                        help="--suite: seconds for the whole run (later rows are skipped)")
    parser.add_argument("--only", default="", metavar="PREFIX",
                        help="--suite: only the rows whose label starts so (`cluster`, `ws_4x1`)")
    parser.add_argument("--clusters", action="store_true",
                        help="the cluster rows (cluster_multicast, CUTLASS's WS test), with the "
                             "partial-order reduction; with --unreduced also without it")
    parser.add_argument("--max-states", type=int, default=2_000_000)
    args = parser.parse_args()
    if args.suite:
        use = not args.no_spin and bool(shutil.which("spin") and shutil.which("gcc"))
        suite(args.suite, args.cap_states, args.cap_s, args.budget, use, args.only)
        return
    if args.clusters:
        clusters(args.timeout, args.max_states, args.unreduced)
        return
    if args.poll:
        poll(args.repeat)
        return
    if args.summarize:
        rows = []
        for name in args.summarize:
            text = Path(name).read_text()
            answered = STOP_NOTE in text
            for row in filter(None, map(parse_row, text.splitlines())):
                if answered:  # the whole stop_at_first answer is when the client has it
                    row["verdict_s"] = max(row["verdict_s"], row["answer_s"])
                    if row["spin"]:
                        row["spin"]["faster"] = row["verdict_s"] < row["spin"]["total_s"]
                rows.append(row)
        print(summarize(rows))
        return
    stop_at_first = args.stop_at_first or bool(args.grid)
    if args.config:
        rows = [(int(s), int(t), int(k), rest[0] if rest else None)
                for s, t, k, *rest in (c.split(",") for c in args.config)]
    elif args.grid:
        rows = [(s, t, k, bug) for s in range(1, 5) for t in range(1, 9) for k in range(1, 5)
                for bug in TOGGLES]
    else:
        rows = ISSUE_TABLE + [(2, 4, k, bug) for k in (1, 2) for bug in TOGGLES]
    first, step = map(int, args.slice.split("/"))
    if step > 1:  # dealt in a fixed shuffled order, so slices take about the same time
        dealt = rows[:]
        random.Random(12).shuffle(dealt)
        rows = sorted(dealt[first::step], key=rows.index)
    use_spin = not args.no_spin
    if use_spin and (shutil.which("spin") is None or shutil.which("gcc") is None):
        print("spin or gcc not found: the SPIN columns are skipped")
        use_spin = False
    print(f"{SCENARIO} tile_bytes=2048 chunk_bytes=1024 (python {sys.version.split()[0]}); "
          f"checker best/median of {args.repeat}; * = a limit stopped the search"
          + (f"; {STOP_NOTE}" if stop_at_first else ""))
    print(HEADER)
    print("-" * len(HEADER))
    modes = [True, False] if args.unreduced else [True]
    done, began = [], time.perf_counter()
    for number, (stages, tiles, consumers, bug) in enumerate(rows, 1):
        theirs = spin(stages, tiles, consumers, bug) if use_spin else None
        for reduce in modes:
            ours = checker(stages, tiles, consumers, bug, reduce, args.repeat, args.timeout,
                           stop_at_first)
            line = (f"{stages:>1} {tiles:>2} {consumers:>1} {bug or '(correct)':<28} "
                    f"{'reduced' if reduce else 'full BFS':<8} {ours['verdict']:<9} "
                    f"{ours['states']:>9,} {ours['best']:>9.3f} {ours['median']:>7.3f} "
                    f"{ours['answer']:>8.2f} {ours['rate']:>9,.0f} | ")
            if theirs is None:
                line += "skipped"
            else:
                agree = ours["verdict"].rstrip("*") == theirs["verdict"]
                faster = ours["best"] < theirs["total_s"]
                line += (f"{theirs['verdict']:<6} {theirs['states'] or 0:>11,} "
                         f"{theirs['total_s']:>7.2f} {'yes' if agree else 'NO':>5} "
                         f"{'yes' if faster else 'no':>6}")
            print(line, flush=True)
            if reduce:
                done.append(parse_row(line))
        if args.grid:
            sys.stderr.write(f"[{number}/{len(rows)}] S{stages} T{tiles} K{consumers} "
                             f"{bug or 'correct'}: {time.perf_counter() - began:.0f} s\n")
    print(summarize(done))


if __name__ == "__main__":
    main()
