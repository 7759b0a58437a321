"""Builds small raw GPU logs by hand, record by record, for decoder tests that need no GPU."""

from __future__ import annotations

from app.capture import kernels as K


def header(op: int, slot: int, barrier: int, tile: int) -> int:
    return op | (slot << 8) | (barrier << 16) | (tile << 32)


class RawLog:
    """A raw log (format mbarrier-inspector/raw-gpu-log) grown one record at a time."""

    def __init__(self, scenario: str, agents: list[str], **config):
        self.config = {"scenario": scenario, "stages": 1, "tiles": 2, "tile_bytes": 4096,
                       "chunk_bytes": 1024, "consumers": 1, "bugs": [], "ctas": 1,
                       "log_ctas": 1, "timeout_us": 2000.0, "fence_log": False, **config}
        self.agents = agents
        self.records: list[list[int]] = []
        self.error = None

    def add(self, slot: int, clock: int, op: int, barrier: int = K.NO_BARRIER, tile: int = 0,
            a: int = 0, b: int = 0, token: int = 0, result: int = 0, extra: int = 0) -> None:
        self.records.append([0, slot, clock | 1, 1_000_000 + clock // 2,
                             header(op, slot, barrier, tile), a, b, token, result, extra])

    @staticmethod
    def token(parity: int, pending: int) -> int:
        return (parity << 63) | (((-pending) & 0xFFFFF) << 43)

    def raw(self) -> dict:
        return {"format": "mbarrier-inspector/raw-gpu-log", "version": 1,
                "config": dict(self.config), "agents": list(self.agents),
                "device": {"device": "test", "driver": "0", "cuda": "0"},
                "captured_at": "2026-01-01T00:00:00Z", "launch": {}, "error": self.error,
                "elapsed_ms": 0.1, "record_words": 8, "records": self.records,
                "summary": [], "dst": None}


def single_barrier_log(tiles: int = 2, forget_phase: bool = False) -> RawLog:
    """A correct-looking single_barrier run: every wait returns after the bytes landed."""
    log = RawLog("single_barrier", ["thread"], tiles=tiles,
                 bugs=["forget_phase_toggle"] if forget_phase else [])
    clock = 1000
    log.add(0, clock, K.OP_INIT, 0, 0, a=1)
    for i in range(tiles):
        clock += 100
        log.add(0, clock, K.OP_ARRIVE_EXPECT_TX, 0, i, a=4096, token=log.token(i & 1, 1),
                result=1)
        clock += 100
        log.add(0, clock, K.OP_TMA_LOAD, 0, i, a=4096, b=4)
        clock += 2000
        parity = 0 if forget_phase else i & 1
        log.add(0, clock, K.OP_WAIT, 0, i, a=parity, b=clock - 1900, result=1, extra=3)
        clock += 500
        log.add(0, clock, K.OP_READ, 0, i, a=1024, b=0, token=0, result=0xFFFFFFFF)
    return log
