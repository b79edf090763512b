"""Notebook 01's exercises: average power and energy per step of a measurement window."""

from __future__ import annotations

from zeus_nb.course.exercises.base import Case, Mistake, rng
from zeus_nb.monitor import Measurement

EVERY_GPU = (
    "the window's energy counts every GPU it measured, not only GPU 0: look at what the "
    "measurement holds for all of them together"
)


def average_power_ref(m: Measurement) -> float:
    return m.total_energy / m.time if m.time > 0 else 0.0


def average_power_cases() -> list[Case]:
    r = rng("average_power")
    units = "power (W) is the window's energy (J) divided by its time (s)"
    t, e = round(r.uniform(0.5, 30), 3), round(r.uniform(50, 9000), 1)
    e2 = round(r.uniform(50, 9000), 1)
    three = {i: round(r.uniform(1, 500), 1) for i in range(3)}
    return [
        Case("one GPU", (Measurement(t, {0: e}),), units),
        Case("two GPUs", (Measurement(t, {0: e, 1: e2}),), "the window's power adds up its GPUs"),
        Case(
            "an empty window (0 s)",
            (Measurement(0.0, {0: 0.0, 1: 0.0}),),
            "a window of 0 s has 0 W (no division by zero)",
        ),
        Case("a random window", (Measurement(round(r.uniform(0.1, 5), 3), three),), units),
    ]


def average_power_mistakes() -> list[Mistake]:
    return [
        Mistake(
            "GPU 0 only",
            lambda m: m.gpu_energy[0] / m.time if m.time > 0 else 0.0,
            EVERY_GPU,
        ),
        Mistake(
            "time over energy",
            lambda m: m.time / m.total_energy if m.total_energy else 0.0,
            "power is energy divided by time, not time divided by energy",
        ),
        Mistake(
            "energy",
            lambda m: m.total_energy,
            "that is the window's energy in J: divide it by the time to get W",
        ),
        Mistake(
            "per-GPU mean",
            lambda m: m.total_energy / m.time / len(m.gpu_energy) if m.time > 0 else 0.0,
            "the window's power counts all its GPUs together: do not divide by the number of GPUs",
        ),
    ]


def energy_per_step_ref(m: Measurement, steps: int) -> float:
    return m.total_energy / steps


def energy_per_step_cases() -> list[Case]:
    r = rng("energy_per_step")
    per = "joules per step are the window's energy over its number of steps"
    # No case's time equals its steps or steps - 1, so dividing by the time, by the steps and
    # by one step less give three different answers everywhere.
    return [
        Case("one GPU", (Measurement(10.0, {0: round(r.uniform(100, 900), 1)}), 50), per),
        Case(
            "two GPUs",
            (Measurement(2.5, {0: round(r.uniform(50, 150), 1), 1: 30.0}), 4),
            "the energy counts every GPU of the window",
        ),
        Case(
            "a random window",
            (
                Measurement(round(r.uniform(1, 9), 3), {0: round(r.uniform(10, 5000), 1)}),
                r.randint(11, 99),
            ),
            per + " (the window's time plays no part)",
        ),
    ]


def energy_per_step_mistakes() -> list[Mistake]:
    return [
        Mistake("GPU 0 only", lambda m, n: m.gpu_energy[0] / n, EVERY_GPU),
        Mistake(
            "per second",
            lambda m, n: m.total_energy / m.time,
            "that is energy per second (W): divide by the number of steps instead",
        ),
        Mistake(
            "steps over energy",
            lambda m, n: n / m.total_energy,
            "joules per step is energy divided by steps, not steps divided by energy",
        ),
        Mistake(
            "energy",
            lambda m, n: m.total_energy,
            "that is the whole window's energy: divide it by the number of steps",
        ),
        Mistake(
            "one step less",
            lambda m, n: m.total_energy / (n - 1),
            "divide by the number of steps itself, not by one less: the window holds `steps` steps",
        ),
        Mistake(
            "one step more",
            lambda m, n: m.total_energy / (n + 1),
            "divide by the number of steps itself, not by one more",
        ),
    ]
