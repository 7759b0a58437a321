"""The configuration of one run: a compiled pipeline program and what chose it.

`app.lang` builds it from a pipeline text, parameter values and bug toggles. Two configurations
are the same run exactly when their keys are equal (the source's sha256, the parameter values, the
toggles), since the program is a pure function of those three; so the key alone is hashed and
compared, and the program travels with it (plain frozen data, picklable).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .program import Program

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
    "missing_tcgen05_fence",
    "missing_tcgen05_wait",
    "release_local_only",
    "expect_tx_one_cta",
    "no_producer_tail",
)
"""The toggle names the built-in scenarios use (DESIGN.md's contract); a pipeline text may
declare toggles of any name."""


@dataclass(frozen=True, slots=True, eq=False)
class PipelineConfig:
    """Everything that fixes a run except the schedule."""

    program: Program
    source_sha256: str
    params: tuple[tuple[str, int], ...] = ()
    bugs: frozenset[str] = field(default_factory=frozenset)

    @property
    def key(self) -> tuple:
        return (self.source_sha256, self.params, self.bugs)

    def __eq__(self, other) -> bool:
        return isinstance(other, PipelineConfig) and self.key == other.key

    def __hash__(self) -> int:
        return hash(self.key)

    def has(self, bug: str) -> bool:
        return bug in self.bugs

    def param(self, name: str, default: int | None = None) -> int | None:
        return dict(self.params).get(name, default)
