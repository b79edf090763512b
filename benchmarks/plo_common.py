"""What the power-limit benchmarks share: the selectors, the criterion, a run on a synthetic
monitor and the tally of adaptive against exhaustive profiling.

Imported by ``bench_plo.py`` and ``plo_v100.py`` (run from the repository root, so this folder is
on ``sys.path``).
"""

from __future__ import annotations

from dataclasses import dataclass

from zeus_nb.optimizer.power_limit import (
    GlobalPowerLimitOptimizer,
    MaxSlowdownConstraint,
    ZeusCost,
)
from zeus_nb.optimizer.power_limit.registry import SELECTORS, make_selector
from zeus_nb.optimizer.power_limit.synthetic import SyntheticMonitor

WORSE = 0.03
TUNING_SEEDS = range(100)  # noise seeds the adaptive rules were tried and set on
OTHER_NOISE = 100_000  # seed offset of the second exhaustive run (the noise floor)
CONSTRAINT_SLACK = 0.05

# Knob values each registry selector is benchmarked with (its whole slider range, in steps).
KNOB_VALUES = {
    "ZeusCost": (0.0, 0.25, 0.5, 0.75, 1.0),
    "MaxSlowdownConstraint": (1.0, 1.1, 1.2, 1.5, 2.0, 3.0),
}


def selectors():
    """Every selector of the registry, each knob at the values of KNOB_VALUES (13 in all).

    A selector added to the registry with a knob but without values here raises KeyError, so
    the benchmark never silently leaves one out.
    """
    for name, spec in SELECTORS.items():
        if spec.knob is None:
            yield make_selector(name)
        else:
            for value in KNOB_VALUES[name]:
                yield make_selector(name, value)


def criterion(selector, full, limit: float) -> tuple[float, bool]:
    """(criterion value at ``limit`` on the full measurements, whether constraints hold)."""
    m = next(x for x in full if x.power_limit == limit)
    if isinstance(selector, MaxSlowdownConstraint):
        t_max = max(full, key=lambda x: x.power_limit).time
        return m.energy, m.time <= selector.factor * t_max * (1 + CONSTRAINT_SLACK)
    return selector.score(m.energy, m.time, full), True


def reference(selector, exact, limit: float) -> float:
    """The yardstick for regret: the criterion of the exhaustive run's choice ``limit``.

    For MaxSlowdownConstraint, a choice that breaks the constraint on the noise-free curve met
    it only through its noise (the slack excuses such a choice; it does not make its energy
    attainable). Then the yardstick is the noise-free choice's energy: what the selector asks
    for. Otherwise a run that rightly refuses a too-slow limit would count as worse.
    """
    value, _ = criterion(selector, exact, limit)
    if isinstance(selector, MaxSlowdownConstraint):
        t_max = max(exact, key=lambda x: x.power_limit).time
        t = next(x.time for x in exact if x.power_limit == limit)
        if t > selector.factor * t_max * (1 + 1e-12):
            value, _ = criterion(selector, exact, selector.select(exact))
    return value


def regret(selector, exact, limit: float, ref_limit: float) -> float:
    """How much worse choosing ``limit`` is than choosing ``ref_limit`` (the same choice: 0;
    inf: the constraint is broken), on the noise-free criterion."""
    if limit == ref_limit:
        return 0.0
    c, ok = criterion(selector, exact, limit)
    return c / reference(selector, exact, ref_limit) - 1.0 if ok else float("inf")


def synthetic_run(profile, selector, adaptive, seed, margin, warmup, steps):
    """One profiling run on ``profile`` with noise ``seed``; the finished optimizer."""
    monitor = SyntheticMonitor(profile, seed)
    plo = GlobalPowerLimitOptimizer(
        monitor,
        selector,
        wait_steps=0,
        warmup_steps=warmup,
        profile_steps=steps,
        pl_step=profile.pl_step,
        adaptive=adaptive,
        noise_margin=margin,
        verbose=False,
    )
    while not plo.done:
        plo.on_step_begin()
        monitor.step()
        plo.on_step_end()
    plo.close()
    return plo


def label(selector) -> str:
    """A short name: Energy, ZeusCost(0.5), MaxSlowdown(1.1)."""
    if isinstance(selector, ZeusCost):
        return f"ZeusCost({selector.eta_knob:g})"
    if isinstance(selector, MaxSlowdownConstraint):
        return f"MaxSlowdown({selector.factor:g})"
    return type(selector).__name__


def span(seeds: range) -> str:
    return f"{seeds.start}-{seeds.stop - 1}" if len(seeds) > 1 else f"{seeds.start}"


@dataclass
class Tally:
    """Adaptive vs exhaustive over a group of cases."""

    cases: int = 0
    exhaustive_s: float = 0.0
    adaptive_s: float = 0.0
    identical: int = 0  # cases where both chose the same limit
    worst: float = -1.0  # worst regret, every selector
    worst_score: float = -1.0  # worst regret, the selectors that minimise a score
    over: int = 0  # adaptive choices more than WORSE worse than exhaustive's
    floor: int = 0  # second exhaustive runs (other noise) more than WORSE worse

    def add(self, sel, ex, ad, regret: float, regret2: float) -> None:
        self.cases += 1
        self.exhaustive_s += ex.profiling_time
        self.adaptive_s += ad.profiling_time
        self.identical += ex.optimal_power_limit == ad.optimal_power_limit
        self.worst = max(self.worst, regret)
        if not isinstance(sel, MaxSlowdownConstraint):
            self.worst_score = max(self.worst_score, regret)
        self.over += regret > WORSE + 1e-12
        self.floor += regret2 > WORSE + 1e-12

    @property
    def saving(self) -> float:
        return 100.0 * (1.0 - self.adaptive_s / self.exhaustive_s)

    def met(self, saving: float = 40.0) -> bool:
        """The targets: at least ``saving`` % less profiling time, worst regret <= WORSE."""
        return self.saving >= saving and self.worst <= WORSE + 1e-12

    @staticmethod
    def header(label: str) -> str:
        return (
            f"  {label:<18} {'cases':>5} {'saving':>7} {'identical':>9} {'worst regret':>13} "
            f"{'(score)':>8} {'> 3%':>5} {'exh2 > 3%':>10}"
        )

    def row(self, label: str) -> str:
        score = f"{100 * self.worst_score:>7.2f}%" if self.worst_score >= 0 else f"{'-':>8}"
        return (
            f"  {label:<18} {self.cases:>5} {self.saving:>6.1f}% {self.identical:>9} "
            f"{100 * self.worst:>12.2f}% {score} {self.over:>5} {self.floor:>10}"
        )

    def summary(self) -> dict:
        return {
            "cases": self.cases,
            "saving_pct": self.saving,
            "identical": self.identical,
            "worst_regret_pct": 100 * self.worst,
            "worst_score_regret_pct": 100 * self.worst_score if self.worst_score >= 0 else None,
            "over_3pct": self.over,
            "second_exhaustive_over_3pct": self.floor,
        }
