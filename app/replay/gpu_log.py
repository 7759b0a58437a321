"""Reading a generated kernel's raw GPU log (format v2): its records unpacked, one list per agent
in program order, merged into one order by clock (see app.replay.gpu_order), and the words a read
checked, in words."""

from __future__ import annotations

import heapq
from dataclasses import dataclass

from app.capture.codegen import KIND_NAME, RECORD_WORDS

OBSERVATIONS = ("wait_parity", "wait_token", "ld_shared", "ld_global", "wait_group",
                "cluster_wait")
"""Record kinds ordered by the clock read after them; every other kind by the clock before (a
`bar.sync` too: its arrival is the engine's move, and the completing arrival restarts it)."""


class ReplayError(ValueError):
    """A raw log that cannot be replayed (not a generated kernel's log, or corrupt)."""


@dataclass
class GpuRecord:
    cta: int
    slot: int
    pre: int
    post: int
    kind: str
    node: int
    detail: int
    words: tuple[int, ...]
    seq: int

    @property
    def key(self) -> int:
        if self.kind == "setmaxnreg":  # an `.inc` (detail 1) returned once the pool held enough
            return self.post if self.detail else self.pre
        return self.post if self.kind in OBSERVATIONS else self.pre

    @classmethod
    def unpack(cls, row: list[int], seq: int) -> GpuRecord:
        if len(row) != 2 + RECORD_WORDS:
            raise ReplayError(f"records[{seq}]: expected {2 + RECORD_WORDS} integers")
        cta, slot, w0, w1, w2, *rest = (int(v) for v in row)
        kind = KIND_NAME.get(w2 & 0xFF)
        if kind is None:
            raise ReplayError(f"records[{seq}]: unknown record kind {w2 & 0xFF}")
        return cls(cta, slot, w0 & ~1, w1, kind, (w2 >> 16) & 0xFFFF, w2 >> 32, tuple(rest),
                   seq)


def gpu_records(raw: dict, cta: int = 0) -> list[list[GpuRecord]]:
    """Unit `cta`'s records (a CTA's, or a cluster's), one list per agent slot, in each agent's
    program order, with every clock on the clock of the cluster's CTA 0 (`align_clocks`)."""
    if raw.get("format") != "mbarrier-inspector/raw-gpu-log" or raw.get("version") != 2:
        raise ReplayError("not a generated kernel's raw log (format v2)")
    per_agent: list[list[GpuRecord]] = [[] for _ in raw["agents"]]
    for seq, row in enumerate(raw["records"]):
        rec = GpuRecord.unpack(row, seq)
        if rec.cta == cta:
            if not 0 <= rec.slot < len(per_agent):
                raise ReplayError(f"records[{seq}]: agent slot {rec.slot} out of range")
            per_agent[rec.slot].append(rec)
    align_clocks(per_agent)
    return per_agent


def align_clocks(per_agent: list[list[GpuRecord]]) -> dict[int, int]:
    """Put the records of a cluster's CTAs on one clock. Each SM counts its own `%clock64`, so
    a kernel launched as clusters reads the clock in every CTA just as each of four cluster
    barriers releases them all (the start record: `detail` the CTA's rank, words 0..3 the
    clocks); a CTA's offset from CTA 0 is the median of the four differences. Returns the
    offsets by rank (empty without a cluster)."""
    syncs: dict[int, tuple[int, ...]] = {}
    for recs in per_agent:
        for rec in recs:
            if rec.kind == "start" and any(rec.words[:4]):
                syncs.setdefault(rec.detail, rec.words[:4])
    if len(syncs) < 2 or 0 not in syncs:
        return {}
    offsets = {}
    for rank, clocks in syncs.items():
        diffs = sorted(c - z for c, z in zip(clocks, syncs[0], strict=True))
        offsets[rank] = (diffs[1] + diffs[2]) // 2
    for recs in per_agent:
        rank = next((r.detail for r in recs if r.kind == "start"), 0)
        shift = offsets.get(rank, 0)
        if not shift:
            continue
        for rec in recs:
            rec.pre -= shift
            if rec.kind not in ("start", "end"):  # their second word is %globaltimer
                rec.post -= shift
    return offsets


def merged(per_agent: list[list[GpuRecord]]) -> list[GpuRecord]:
    """One order for all agents: by clock (see the module docs), each agent's own order kept."""
    heads = [(recs[0].key, slot, 0) for slot, recs in enumerate(per_agent) if recs]
    heapq.heapify(heads)
    out = []
    while heads:
        _, slot, i = heapq.heappop(heads)
        recs = per_agent[slot]
        out.append(recs[i])
        if i + 1 < len(recs):
            # never before this agent's previous record, whatever its clock says
            heapq.heappush(heads, (max(recs[i + 1].key, recs[i].key), slot, i + 1))
    return out


CLOCK_GHZ = 1.98
"""`%clock64` rate of the H200's SMs while the captures ran (docs/gpu-capture.md)."""


def bits(mask: int) -> str:
    return ",".join(str(i) for i in range(64) if mask >> i & 1) or "none"


def read_words(ok: int, stale: int, never: int, chunks: int, bad: int) -> str:
    full = (1 << chunks) - 1
    if ok == full:
        return "all chunks right"
    parts = [f"chunks {bits(ok)} right"]
    if stale:
        parts.append(f"earlier-tile words in chunks {bits(stale)}")
    if never:
        parts.append(f"never-written words in chunks {bits(never)}")
    other = full & ~ok & ~stale & ~never
    if other:
        parts.append(f"later-tile words in chunks {bits(other)}")
    return f"{bad} wrong words: " + "; ".join(parts)


def config_of(raw: dict):
    """The engine configuration a generated raw log was captured from."""
    from app.capture.gen_runner import resolve

    p = raw.get("pipeline") or {}
    if "source" not in p:
        raise ReplayError("the raw log names no pipeline source")
    _, _, cfg = resolve(p["source"], p.get("params", {}), p.get("bugs", []))
    return cfg
