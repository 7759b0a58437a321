"""One test per rule of docs/semantics.md's mbarrier table, phase completion and undefined
behaviour."""

import pytest

from app.sim.barrier import COUNT_LIMIT, TX_LIMIT, Mbarrier, UndefinedBehavior


def fresh(count: int = 1) -> Mbarrier:
    barrier = Mbarrier()
    barrier.init(count)
    return barrier


def state(b: Mbarrier) -> tuple:
    return (b.phase, b.parity, b.pending_arrivals, b.expected_arrivals, b.tx_count, b.valid)


def test_init_starts_phase_zero_with_count_pending():
    assert state(fresh(3)) == (0, 0, 3, 3, 0, True)


@pytest.mark.parametrize("count", [0, COUNT_LIMIT + 1])
def test_init_count_out_of_range_is_refused(count):
    with pytest.raises(ValueError):
        Mbarrier().init(count)


def test_arrive_decrements_pending_and_last_arrival_completes_the_phase():
    b = fresh(2)
    assert b.arrive() is False
    assert state(b) == (0, 0, 1, 2, 0, True)
    assert b.arrive() is True
    assert state(b) == (1, 1, 2, 2, 0, True)


def test_arrive_with_count():
    b = fresh(5)
    assert b.arrive(5) is True
    assert (b.phase, b.pending_arrivals) == (1, 5)


def test_arrive_drop_lowers_expected_for_this_and_later_phases():
    b = fresh(3)
    assert b.arrive_drop() is False
    assert state(b) == (0, 0, 2, 2, 0, True)
    b.arrive()
    assert b.arrive() is True
    assert (b.phase, b.pending_arrivals, b.expected_arrivals) == (1, 2, 2)


def test_expect_tx_adds_bytes_without_arriving():
    b = fresh(1)
    b.expect_tx(4096)
    assert state(b) == (0, 0, 1, 1, 4096, True)


def test_arrive_expect_tx_is_expect_then_arrive_and_waits_for_bytes():
    b = fresh(1)
    assert b.arrive_expect_tx(4096) is False
    assert (b.pending_arrivals, b.tx_count) == (0, 4096)
    assert b.complete_tx(1024) is False
    assert b.complete_tx(3072) is True
    assert state(b) == (1, 1, 1, 1, 0, True)


def test_bytes_may_land_before_their_expect_tx():
    b = fresh(1)
    b.complete_tx(1024)
    assert b.tx_count == -1024
    assert b.arrive() is False
    assert b.expect_tx(1024) is True
    assert b.phase == 1


def test_test_wait_parity_names_the_previous_phase():
    b = fresh(1)
    assert b.test_wait_parity(0) is False
    assert b.test_wait_parity(1) is True
    b.arrive()
    assert b.test_wait_parity(0) is True
    assert b.try_wait_parity(0) is True
    assert b.try_wait_parity(1) is False


def test_stale_parity_returns_at_once_two_phases_later():
    """The forget_phase_toggle bug: parity 0 again after phase 0 and phase 1 completed."""
    b = fresh(1)
    b.arrive()
    b.arrive()
    assert b.phase == 2
    assert b.test_wait_parity(1) is True


def test_inval_then_init_again():
    b = fresh(1)
    b.inval()
    assert b.valid is False
    b.init(2)
    assert state(b) == (0, 0, 2, 2, 0, True)


@pytest.mark.parametrize("op", [
    lambda b: b.arrive(), lambda b: b.arrive_drop(), lambda b: b.expect_tx(16),
    lambda b: b.arrive_expect_tx(16), lambda b: b.complete_tx(16),
    lambda b: b.test_wait_parity(0), lambda b: b.try_wait_parity(0), lambda b: b.inval(),
])
def test_uninitialized(op):
    with pytest.raises(UndefinedBehavior) as err:
        op(Mbarrier())
    assert err.value.rule == "uninitialized"


def test_uninitialized_after_inval():
    b = fresh(1)
    b.inval()
    with pytest.raises(UndefinedBehavior) as err:
        b.arrive()
    assert err.value.rule == "uninitialized"


def test_reinit():
    with pytest.raises(UndefinedBehavior) as err:
        fresh(1).init(1)
    assert err.value.rule == "reinit"


def test_over_arrival():
    b = fresh(2)
    with pytest.raises(UndefinedBehavior) as err:
        b.arrive(3)
    assert err.value.rule == "over_arrival"
    assert state(b) == (0, 0, 2, 2, 0, True)


def test_over_arrival_on_arrive_expect_tx_with_nothing_pending():
    b = fresh(1)
    b.arrive_expect_tx(4096)
    with pytest.raises(UndefinedBehavior) as err:
        b.arrive_expect_tx(4096)
    assert err.value.rule == "over_arrival"
    assert b.tx_count == 4096


def test_drop_to_zero():
    with pytest.raises(UndefinedBehavior) as err:
        fresh(1).arrive_drop()
    assert err.value.rule == "drop_to_zero"


def test_tx_overflow():
    b = fresh(1)
    b.expect_tx(TX_LIMIT)
    with pytest.raises(UndefinedBehavior) as err:
        b.expect_tx(1)
    assert err.value.rule == "tx_overflow"
    assert b.tx_count == TX_LIMIT


def test_tx_underflow():
    b = fresh(1)
    b.complete_tx(TX_LIMIT)
    with pytest.raises(UndefinedBehavior) as err:
        b.complete_tx(1)
    assert err.value.rule == "tx_underflow"
