import pytest

from zeus_nb import check


def test_correct_answers_pass(capsys):
    assert check.average_power(lambda m: m.total_energy / m.time if m.time else 0.0)
    assert check.energy_per_step(lambda m, n: m.total_energy / n)
    assert check.zeus_cost(lambda e, t, eta, p: eta * e + (1 - eta) * p * t)
    assert check.should_stop_early(lambda c, best, beta: best is not None and c > beta * best)
    assert check.aggregate_data_parallel(lambda ts, es: (max(ts), sum(es)))

    def front(points):
        out = []
        for t, e in sorted(points):
            if not out or e < out[-1][1]:
                out.append((t, e))
        return out

    assert check.pareto_front(front)
    assert capsys.readouterr().out.count("✓") == 6


def test_wrong_answer_names_input_and_expected():
    with pytest.raises(check.CheckError, match=r"zeus_cost\(1000.0, 10.0, 0.5, 300.0\) returned"):
        check.zeus_cost(lambda e, t, eta, p: e + p * t)
    with pytest.raises(check.CheckError, match="returned 201.0, expected 200.0"):
        check.average_power(lambda m: m.total_energy / max(m.time, 1e-3) + 1)
    with pytest.raises(check.CheckError, match="beta=inf"):
        check.should_stop_early(lambda c, best, beta: best is not None and c > 2 * best)


def test_student_stub_propagates_not_implemented():
    def stub(*_):
        raise NotImplementedError("exercise")

    with pytest.raises(NotImplementedError):
        check.pareto_front(stub)


def test_crash_is_reported_with_hint():
    with pytest.raises(check.CheckError, match="ZeroDivisionError.*Hint"):
        check.average_power(lambda m: m.total_energy / m.time)


def test_iteration_energy_counts_blocking_power():
    def right(energies, times, iteration, powers):
        return sum(e + p * (iteration - t) for e, t, p in zip(energies, times, powers, strict=True))

    assert check.iteration_energy(right)
    with pytest.raises(check.CheckError, match="blocking"):
        check.iteration_energy(lambda energies, times, iteration, powers: sum(energies))
