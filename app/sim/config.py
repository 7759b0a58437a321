"""The configuration of one pipeline run: which scenario, its sizes, and which bugs are switched on.

Validation of user input lives in `app.scenarios`; this module only names the parts and derives the
numbers every other module needs (chunks per tile, the consumer mask), so they are computed once.
"""

from __future__ import annotations

from dataclasses import dataclass, field

BUG_TOGGLES = (
    "forget_phase_toggle",
    "forget_producer_phase_toggle",
    "expect_tx_short",
    "expect_tx_long",
    "missing_proxy_fence",
    "missing_mma_commit",
    "consumer_skips_release",
    "producer_skips_empty_wait",
    "wrong_arrival_count",
)


@dataclass(frozen=True, slots=True)
class PipelineConfig:
    """Everything that fixes a run except the schedule."""

    pipeline: str
    """The machine shape: single_barrier, tma_ring, kloop_mma or proxy_store (agents.py)."""
    stages: int = 2
    tiles: int = 4
    tile_bytes: int = 4096
    chunk_bytes: int = 1024
    consumers: int = 1
    bugs: frozenset[str] = field(default_factory=frozenset)

    @property
    def chunks(self) -> int:
        """Chunks per tile: how many separate landings (complete_tx) one TMA load makes."""
        return self.tile_bytes // self.chunk_bytes

    def has(self, bug: str) -> bool:
        return bug in self.bugs
