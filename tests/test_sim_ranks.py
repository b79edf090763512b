"""Simulated ranks differ: a per-rank spread of step time and power, and an optional straggler."""

from __future__ import annotations

import pytest

from zeus_nb import device
from zeus_nb.device.sim import SimulatedSystem, parse_straggler, rank_factors
from zeus_nb.errors import InputError


def test_no_spread_and_no_straggler_leave_every_rank_alike():
    assert {rank_factors(r, 0.0, None) for r in range(8)} == {(1.0, 1.0)}


def test_each_rank_draws_its_own_factors_and_keeps_them():
    factors = [rank_factors(r, 0.03, None) for r in range(8)]
    assert len(set(factors)) == 8
    assert factors == [rank_factors(r, 0.03, None) for r in range(8)]
    for t, p in factors:  # a few percent, as GPUs of one model differ
        assert 0.85 < t < 1.15 and 0.85 < p < 1.15


def test_the_straggler_takes_longer_per_step_and_the_others_do_not():
    base = [rank_factors(r, 0.0, None) for r in range(3)]
    slow = [rank_factors(r, 0.0, (1, 1.3)) for r in range(3)]
    assert slow[1] == pytest.approx((1.3, 1.0)) and slow[0] == base[0] and slow[2] == base[2]


@pytest.mark.parametrize("spec", ["1", "x:2", "1:0.5", "-1:2", "1:1000"])
def test_a_bad_straggler_is_named(spec):
    with pytest.raises(InputError, match="RANK:FACTOR"):
        parse_straggler(spec)


def test_straggler_forms():
    assert parse_straggler("") is None and parse_straggler(None) is None
    assert parse_straggler("2:1.5") == (2, 1.5) == parse_straggler((2, 1.5))


def test_step_cost_carries_the_rank_factors():
    plain = SimulatedSystem("a40", "imagenet")
    ranked = SimulatedSystem("a40", "imagenet", rank=1, rank_spread=0.03, straggler="1:1.2")
    t_factor, p_factor = ranked.rank_factors
    assert t_factor == pytest.approx(1.2 * rank_factors(1, 0.03, None)[0])
    for limit in (300.0, 175.0):
        (t0, p0), (t1, p1) = plain.step_cost(256, limit), ranked.step_cost(256, limit)
        assert t1 == pytest.approx(t0 * t_factor) and p1 == pytest.approx(p0 * p_factor)


def test_ranks_of_a_job_measure_different_times_and_energies(monkeypatch):
    """What notebook 05 shows: the slowest rank sets the job's time; energies differ too."""
    monkeypatch.setenv("ZEUS_NB_SIM_RANK_SPREAD", "0.03")
    monkeypatch.setenv("ZEUS_NB_SIM_STRAGGLER", "1:1.25")
    measured = []
    for rank in range(3):
        monkeypatch.setenv("RANK", str(rank))
        system = device.create("sim", seed_offset=rank)
        gpu = system.gpu(0)
        t0, e0 = system.clock(), gpu.energy()
        system.step(10)
        measured.append((system.clock() - t0, gpu.energy() - e0))
    times = [t for t, _ in measured]
    assert max(times) == times[1] and len({round(t, 9) for t in times}) == 3
    assert len({round(e, 6) for _, e in measured}) == 3


def test_rank_spread_is_checked(monkeypatch):
    monkeypatch.setenv("ZEUS_NB_SIM_RANK_SPREAD", "-1")
    with pytest.raises(InputError, match="ZEUS_NB_SIM_RANK_SPREAD"):
        device.create("sim")
