"""The real `Mbarrier` beside a tiny independent model of docs/semantics.md, driven by Hypothesis.

The model keeps its state in one immutable tuple and derives completion from a different reading
of the rule (a phase is complete once the arrivals and bytes owed to it are both settled); any
disagreement prints the shortest program of operations that shows it.
"""

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from app.sim.barrier import TX_LIMIT, Mbarrier, UndefinedBehavior

LIMIT = 2**20 - 1

# model state: (completed_phases, arrivals_owed, arrivals_per_phase, bytes_owed, valid)


def model_settle(s):
    done, owed, per_phase, tx, valid = s
    if valid and owed == 0 and tx == 0:
        return (done + 1, per_phase, per_phase, 0, valid), True
    return s, False


def model_apply(s, op, arg):
    """Returns (new_state, phase_completed, wait_result, ub_rule)."""
    done, owed, per_phase, tx, valid = s
    if op == "init":
        if valid:
            return s, False, None, "reinit"
        return (0, arg, arg, 0, True), False, None, None
    if not valid:
        return s, False, None, "uninitialized"
    if op in ("test_wait_parity", "try_wait_parity"):
        return s, False, done % 2 != arg, None
    if op == "inval":
        return (done, owed, per_phase, tx, False), False, None, None
    if op == "arrive":
        if arg > owed:
            return s, False, None, "over_arrival"
        new, completed = model_settle((done, owed - arg, per_phase, tx, valid))
        return new, completed, None, None
    if op == "arrive_drop":
        if per_phase - arg < 1:
            return s, False, None, "drop_to_zero"
        if arg > owed:
            return s, False, None, "over_arrival"
        new, completed = model_settle((done, owed - arg, per_phase - arg, tx, valid))
        return new, completed, None, None
    if op == "expect_tx":
        if tx + arg > LIMIT:
            return s, False, None, "tx_overflow"
        new, completed = model_settle((done, owed, per_phase, tx + arg, valid))
        return new, completed, None, None
    if op == "arrive_expect_tx":
        if owed < 1:
            return s, False, None, "over_arrival"
        if tx + arg > LIMIT:
            return s, False, None, "tx_overflow"
        new, completed = model_settle((done, owed - 1, per_phase, tx + arg, valid))
        return new, completed, None, None
    if op == "complete_tx":
        if tx - arg < -LIMIT:
            return s, False, None, "tx_underflow"
        new, completed = model_settle((done, owed, per_phase, tx - arg, valid))
        return new, completed, None, None
    raise AssertionError(op)


def real_apply(barrier: Mbarrier, op, arg):
    method = getattr(barrier, op)
    try:
        result = method() if op == "inval" else method(arg)
    except UndefinedBehavior as ub:
        return False, None, ub.rule
    if op in ("test_wait_parity", "try_wait_parity"):
        return False, result, None
    return result, None, None


counts = st.integers(min_value=1, max_value=4) | st.sampled_from([LIMIT, LIMIT - 1])
byte_counts = st.integers(min_value=0, max_value=4) .map(lambda k: k * 1024) | st.sampled_from(
    [TX_LIMIT, TX_LIMIT - 1, 1])


class BarrierAgainstModel(RuleBasedStateMachine):
    def __init__(self):
        super().__init__()
        self.real = Mbarrier()
        self.model = (0, 0, 0, 0, False)
        self.rules_seen = set()

    def check(self, op, arg):
        new, completed, wait, rule = model_apply(self.model, op, arg)
        got = real_apply(self.real, op, arg)
        assert got == (completed, wait, rule), f"{op}({arg}): real {got}, model " \
                                               f"{(completed, wait, rule)}"
        self.model = new

    @rule(count=st.integers(min_value=1, max_value=4))
    def init(self, count):
        self.check("init", count)

    @rule(count=counts)
    def arrive(self, count):
        self.check("arrive", count)

    @rule(count=counts)
    def arrive_drop(self, count):
        self.check("arrive_drop", count)

    @rule(nbytes=byte_counts)
    def expect_tx(self, nbytes):
        self.check("expect_tx", nbytes)

    @rule(nbytes=byte_counts)
    def arrive_expect_tx(self, nbytes):
        self.check("arrive_expect_tx", nbytes)

    @rule(nbytes=byte_counts)
    def complete_tx(self, nbytes):
        self.check("complete_tx", nbytes)

    @rule(parity=st.integers(min_value=0, max_value=1))
    def test_wait_parity(self, parity):
        self.check("test_wait_parity", parity)

    @rule(parity=st.integers(min_value=0, max_value=1))
    def try_wait_parity(self, parity):
        self.check("try_wait_parity", parity)

    @rule()
    def inval(self):
        self.check("inval", None)

    @invariant()
    def same_state(self):
        done, owed, per_phase, tx, valid = self.model
        r = self.real
        assert r.valid == valid
        if valid:
            assert (r.phase, r.pending_arrivals, r.expected_arrivals, r.tx_count) == \
                (done, owed, per_phase, tx)

    @invariant()
    def semantics_invariants(self):
        r = self.real
        assert r.parity == r.phase % 2
        assert -TX_LIMIT <= r.tx_count <= TX_LIMIT
        if r.valid:
            assert 0 <= r.pending_arrivals <= r.expected_arrivals
            assert not (r.pending_arrivals == 0 and r.tx_count == 0), "a phase left uncompleted"


BarrierAgainstModel.TestCase.settings = settings(max_examples=300, stateful_step_count=40,
                                                 deadline=None)
TestBarrierAgainstModel = BarrierAgainstModel.TestCase


def test_model_reaches_every_undefined_behaviour_rule():
    """The stateful test is only as good as its coverage: each rule is reachable in the model."""
    programs = {
        "uninitialized": [("arrive", 1)],
        "reinit": [("init", 1), ("init", 1)],
        "over_arrival": [("init", 1), ("arrive", 2)],
        "drop_to_zero": [("init", 1), ("arrive_drop", 1)],
        "tx_overflow": [("init", 1), ("expect_tx", LIMIT), ("expect_tx", 1)],
        "tx_underflow": [("init", 1), ("complete_tx", LIMIT), ("complete_tx", 1)],
    }
    for expected, program in programs.items():
        s, real, outcome = (0, 0, 0, 0, False), Mbarrier(), None
        for op, arg in program:
            s, _, _, outcome = model_apply(s, op, arg)
            assert real_apply(real, op, arg)[2] == outcome
        assert outcome == expected
