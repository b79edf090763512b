"""Adaptive vs exhaustive profiling on V100-shaped profiles: 7 limits, 250 W down to 100 W.

Two sets, every registry selector (plo_common.selectors), 1/3/5 % step noise:

* ``trace``: every (workload, optimizer, batch size) curve of the shipped V100 power trace
  (``zeus_nb/resources/zeus_traces/summary_power_v100.csv``, 68 curves) as the noise-free
  profile (``synthetic.trace_profiles``), with step noise from a seeded RNG;
* ``synthetic``: the synthetic family (``synthetic.SyntheticProfile``, every shape) with 5 to 7
  limits from 250 W down in 25 W strides.

Per case one exhaustive and one adaptive run read the same noise (one seed), and a second
exhaustive run with other noise gives the noise floor. Then, for reference, the trace curves
without step noise: readings without spread, where only the fixed-margin rules apply (as in the
A40 replay).
"""

from __future__ import annotations

from collections.abc import Iterator

from plo_common import (
    OTHER_NOISE,
    Tally,
    label,
    regret,
    selectors,
    span,
    synthetic_run,
)

from zeus_nb.optimizer.power_limit.synthetic import (
    CURVES,
    OPTIMA,
    SyntheticProfile,
    trace_profiles,
)

V100_NOISE = (0.01, 0.03, 0.05)
V100_LIMITS = range(5, 8)
V100_MAX = 250.0


def profiles(kind: str, noise: float) -> Iterator[tuple[str, str, SyntheticProfile]]:
    """(group, name, profile) of one set (``trace`` or ``synthetic``) at one noise level."""
    if kind == "trace":
        for name, profile in trace_profiles("v100", noise):
            yield name.split("/")[0], name, profile
        return
    for optimum in OPTIMA:
        for curve in CURVES:
            for n in V100_LIMITS:
                profile = SyntheticProfile(n, optimum, curve, noise, max_limit=V100_MAX)
                yield f"{optimum}/{curve}", f"{optimum}/{curve}/{n}", profile


def cases(kind: str, noises, seeds: range, margin: float, warmup: int, steps: int):
    """Per case: (group, name, noise, selector, exhaustive, adaptive, regret, noise-floor regret).

    Noise 0 gives one case per profile and selector (every seed reads the same steps).
    """
    for noise in noises:
        for group, name, profile in profiles(kind, noise):
            exact = profile.exact(steps)
            for sel in selectors():
                for seed in seeds if noise > 0 else seeds[:1]:
                    ex = synthetic_run(profile, sel, False, seed, margin, warmup, steps)
                    ad = synthetic_run(profile, sel, True, seed, margin, warmup, steps)
                    ex2 = synthetic_run(
                        profile, sel, False, seed + OTHER_NOISE, margin, warmup, steps
                    )
                    r = regret(sel, exact, ad.optimal_power_limit, ex.optimal_power_limit)
                    r2 = regret(sel, exact, ex2.optimal_power_limit, ex.optimal_power_limit)
                    yield group, name, noise, sel, ex, ad, r, r2


def v100_section(margin: float, warmup: int, steps: int, seeds: range) -> dict:
    """Print the V100 figures: per set, per noise level, selector and shape; the targets."""
    print()
    print(
        f"V100-shaped profiles (every registry selector, 1/3/5% step noise, seeds {span(seeds)} "
        "per case):"
    )
    out: dict[str, dict] = {}
    total, per_selector = Tally(), []
    for kind in ("trace", "synthetic"):
        parts: list[dict[str, Tally]] = [{"all": Tally()}, {}, {}, {}]
        for group, _, noise, sel, ex, ad, r, r2 in cases(
            kind, V100_NOISE, seeds, margin, warmup, steps
        ):
            for part, key in zip(
                parts, ("all", f"{noise:.0%} noise", label(sel), group), strict=True
            ):
                part.setdefault(key, Tally()).add(sel, ex, ad, r, r2)
            total.add(sel, ex, ad, r, r2)
        groups = {key: tally for part in parts for key, tally in part.items()}
        per_selector += parts[2].values()
        what = (
            "68 V100 trace curves (workload/optimizer/batch size), 7 limits"
            if kind == "trace"
            else "synthetic shapes, 5 to 7 limits from 250 W"
        )
        print(f" {kind}: {what}")
        print(Tally.header(kind))
        for key, tally in groups.items():
            print(tally.row(key))
        out[kind] = {key: tally.summary() for key, tally in groups.items()}
    print(Tally.header("V100, both sets"))
    print(total.row("all"))
    verdict = "met" if total.met() and all(t.met() for t in per_selector) else "NOT met"
    print(f"  targets (>= 40% saving and worst regret <= 3%, each selector on each set): {verdict}")
    out["all"] = total.summary()
    quiet = Tally()
    for _, _, _, sel, ex, ad, r, r2 in cases("trace", (0.0,), seeds, margin, warmup, steps):
        quiet.add(sel, ex, ad, r, r2)
    print(" trace curves without step noise (fixed-margin rules only, as in the A40 replay):")
    print(Tally.header("no step noise"))
    print(quiet.row("all"))
    out["trace_without_noise"] = quiet.summary()
    return out
