"""One PTX mbarrier object (`.layout::v0`), as the PTX ISA's section "Parallel Synchronization and
Communication Instructions: mbarrier" defines it.

The barrier counts completed phases; PTX waits only ever see their parity. A phase completes the
moment an operation leaves no pending arrivals and a zero tx-count; the tx-count may go negative in
between, because bytes may land before their `expect_tx`. Anything PTX leaves undefined raises
`UndefinedBehavior` with the rule's name instead of guessing (docs/semantics.md).
"""

from __future__ import annotations

from operator import attrgetter

COUNT_LIMIT = 2**20 - 1
"""Largest arrival count an mbarrier holds (`init`, `arrive` and `arrive_drop` operands)."""

TX_LIMIT = 2**20 - 1
"""The tx-count stays within [-TX_LIMIT, TX_LIMIT]; `expect_tx` takes 0..TX_LIMIT bytes."""

FIELDS = ("phase", "pending_arrivals", "expected_arrivals", "tx_count", "valid")
BARRIER_FIELDS = attrgetter(*FIELDS)
"""`Mbarrier.freeze` as one C callable: `map(BARRIER_FIELDS, barriers)` freezes a list."""

RULES = ("uninitialized", "reinit", "over_arrival", "drop_to_zero", "tx_overflow", "tx_underflow")


class UndefinedBehavior(Exception):
    """An operation whose result PTX leaves undefined; `rule` is one of RULES."""

    def __init__(self, rule: str, message: str):
        super().__init__(message)
        self.rule = rule
        self.message = message


class Mbarrier:
    """The state of one mbarrier and the operations PTX defines on it.

    Mutable for speed: the engine copies it through `freeze()` / `thaw()` when it needs an
    immutable, hashable value.
    """

    __slots__ = ("phase", "pending_arrivals", "expected_arrivals", "tx_count", "valid")

    def __init__(self) -> None:
        self.phase = 0
        self.pending_arrivals = 0
        self.expected_arrivals = 0
        self.tx_count = 0
        self.valid = False

    @property
    def parity(self) -> int:
        """The bit `try_wait.parity` compares against: the parity of the current phase."""
        return self.phase & 1

    def freeze(self) -> tuple[int, int, int, int, bool]:
        return (self.phase, self.pending_arrivals, self.expected_arrivals, self.tx_count,
                self.valid)

    @classmethod
    def thaw(cls, frozen: tuple[int, int, int, int, bool]) -> Mbarrier:
        barrier = cls.__new__(cls)
        (barrier.phase, barrier.pending_arrivals, barrier.expected_arrivals, barrier.tx_count,
         barrier.valid) = frozen
        return barrier

    def as_dict(self) -> dict:
        return {
            "phase": self.phase,
            "parity": self.phase & 1,
            "pending_arrivals": self.pending_arrivals,
            "expected_arrivals": self.expected_arrivals,
            "tx_count": self.tx_count,
            "valid": self.valid,
        }

    def _require_valid(self, op: str) -> None:
        if not self.valid:
            raise self._invalid(op)

    @staticmethod
    def _invalid(op: str) -> UndefinedBehavior:
        return UndefinedBehavior(
            "uninitialized", f"{op} on an mbarrier that is not initialized (or was invalidated)")

    def _complete_if_done(self) -> bool:
        if self.pending_arrivals == 0 and self.tx_count == 0:
            self.phase += 1
            self.pending_arrivals = self.expected_arrivals
            return True
        return False

    def init(self, count: int) -> bool:
        """`mbarrier.init`: a new phase 0 expecting `count` arrivals."""
        if self.valid:
            raise UndefinedBehavior("reinit", "mbarrier.init on an mbarrier that is still valid")
        if not 1 <= count <= COUNT_LIMIT:
            raise ValueError(f"count must be in 1..{COUNT_LIMIT}")
        self.phase = 0
        self.pending_arrivals = self.expected_arrivals = count
        self.tx_count = 0
        self.valid = True
        return False

    def arrive(self, count: int = 1) -> bool:
        """`mbarrier.arrive`: `count` arrivals on the current phase; True if it completed."""
        if not self.valid:
            raise self._invalid("mbarrier.arrive")
        if count > self.pending_arrivals:
            raise UndefinedBehavior(
                "over_arrival",
                f"arrive of {count} with only {self.pending_arrivals} arrivals pending",
            )
        self.pending_arrivals -= count
        if self.pending_arrivals == 0 and self.tx_count == 0:  # `_complete_if_done`, inlined
            self.phase += 1
            self.pending_arrivals = self.expected_arrivals
            return True
        return False

    def arrive_drop(self, count: int = 1) -> bool:
        """`mbarrier.arrive_drop`: leave the barrier for this and later phases, arriving now."""
        if not self.valid:
            raise self._invalid("mbarrier.arrive_drop")
        if self.expected_arrivals - count < 1:
            raise UndefinedBehavior(
                "drop_to_zero",
                f"arrive_drop of {count} would leave {self.expected_arrivals - count} "
                "expected arrivals",
            )
        if count > self.pending_arrivals:
            raise UndefinedBehavior(
                "over_arrival",
                f"arrive_drop of {count} with only {self.pending_arrivals} arrivals pending",
            )
        self.expected_arrivals -= count
        self.pending_arrivals -= count
        return self._complete_if_done()

    def expect_tx(self, nbytes: int) -> bool:
        """`mbarrier.expect_tx`: announce bytes the current phase must also wait for."""
        if not self.valid:
            raise self._invalid("mbarrier.expect_tx")
        if not 0 <= nbytes <= TX_LIMIT:
            raise ValueError(f"bytes must be in 0..{TX_LIMIT}")
        if self.tx_count + nbytes > TX_LIMIT:
            raise UndefinedBehavior(
                "tx_overflow",
                f"expect_tx of {nbytes} bytes takes the tx-count from {self.tx_count} past "
                f"{TX_LIMIT}",
            )
        self.tx_count += nbytes
        if self.pending_arrivals == 0 and self.tx_count == 0:  # `_complete_if_done`, inlined
            self.phase += 1
            self.pending_arrivals = self.expected_arrivals
            return True
        return False

    def arrive_expect_tx(self, nbytes: int) -> bool:
        """`mbarrier.arrive.expect_tx`: `expect_tx(bytes)`, then one arrival."""
        if not self.valid:
            raise self._invalid("mbarrier.arrive.expect_tx")
        if self.pending_arrivals < 1:
            raise UndefinedBehavior("over_arrival", "arrive with no arrivals pending")
        self.expect_tx(nbytes)
        return self.arrive(1)

    def complete_tx(self, nbytes: int) -> bool:
        """`mbarrier.complete_tx`: bytes landed (what the TMA engine does); no arrival."""
        if not self.valid:
            raise self._invalid("mbarrier.complete_tx")
        if not 0 <= nbytes <= TX_LIMIT:
            raise ValueError(f"bytes must be in 0..{TX_LIMIT}")
        if self.tx_count - nbytes < -TX_LIMIT:
            raise UndefinedBehavior(
                "tx_underflow",
                f"complete_tx of {nbytes} bytes takes the tx-count from {self.tx_count} below "
                f"-{TX_LIMIT}",
            )
        self.tx_count -= nbytes
        if self.pending_arrivals == 0 and self.tx_count == 0:  # `_complete_if_done`, inlined
            self.phase += 1
            self.pending_arrivals = self.expected_arrivals
            return True
        return False

    def test_wait_parity(self, parity: int) -> bool:
        """`mbarrier.test_wait.parity`: has the phase with this parity completed?

        True when the current phase's parity differs from `parity`: the phase named is then the
        one just before the current one. The barrier cannot tell which earlier phase of that
        parity the caller meant, which is what makes a forgotten phase toggle return early.
        """
        if not self.valid:
            raise self._invalid("mbarrier.test_wait.parity")
        return (self.phase & 1) != parity

    def try_wait_parity(self, parity: int) -> bool:
        """`mbarrier.try_wait.parity`: the same answer; a pipeline agent stays blocked on False."""
        if not self.valid:
            raise self._invalid("mbarrier.try_wait.parity")
        return (self.phase & 1) != parity

    def inval(self) -> bool:
        """`mbarrier.inval`: the object is no longer an mbarrier until the next `init`."""
        if not self.valid:
            raise self._invalid("mbarrier.inval")
        self.valid = False
        return False
