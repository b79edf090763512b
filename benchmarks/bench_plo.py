"""Adaptive versus exhaustive power-limit profiling: real A40 logs, then V100-shaped profiles.

Run: python benchmarks/bench_plo.py [--margin M] [--warmup-steps N] [--profile-steps N] [--json]

Every log in zeus_nb/resources/zeus_profiles is replayed (each window's steps spread evenly over its
elapsed time) for every selector of the registry: Energy, Time, ZeusCost(eta 0, .25, .5, .75, 1)
and MaxSlowdownConstraint(1.0, 1.1, 1.2, 1.5, 2, 3) (plo_common.selectors). Per case it prints the
limit chosen exhaustively and adaptively, the selector's criterion for each (evaluated on the full
log), and the profiling time and energy each spent. Last: identical choices, the worst regret,
cases where adaptive is worse by more than 3% on the criterion (for MaxSlowdownConstraint: its
energy, and it must meet the constraint within 5%), and the total profiling-time saving. Targets:
0 cases worse, >= 30% saving.

Replayed windows have no step-to-step spread, so they exercise the fixed-margin rules only. Then:
the simulated A40 with step noise (--sim-noise levels), the single-GPU logs as noise-free curves
with 1/3/5% step noise (--logged-seeds), the synthetic family (--synthetic-seeds), and the
V100-shaped profiles of plo_v100 (--v100-seeds: the V100 power trace's curves and synthetic shapes
with 5 to 7 limits, every registry selector), where the rules bounded by the measured noise apply.
Noise seeds start at --seed-base (default 100): the adaptive rules were set on seeds below 100, so
the default figures come from seeds they never saw. Runs compared with one seed read the same noise
at every limit (see SyntheticSystem). Regret is how much worse the adaptive choice is than the
exhaustive one on the noise-free criterion (plo_common.regret).

Quick look (a few minutes): --sim-noise 0 --logged-seeds 0 --synthetic-seeds 1 --v100-seeds 1
"""

from __future__ import annotations

import argparse
import json
from importlib import resources

from plo_common import (
    OTHER_NOISE,
    TUNING_SEEDS,
    WORSE,
    Tally,
    criterion,
    label,
    regret,
    selectors,
    span,
    synthetic_run,
)
from plo_v100 import v100_section

import zeus_nb
from zeus_nb import device
from zeus_nb.data.traces import WORKLOADS
from zeus_nb.monitor import ZeusMonitor
from zeus_nb.optimizer.power_limit import (
    Energy,
    GlobalPowerLimitOptimizer,
    MaxSlowdownConstraint,
    PowerLimitMeasurement,
    ZeusCost,
)
from zeus_nb.optimizer.power_limit.synthetic import (
    CURVES,
    OPTIMA,
    LoggedProfile,
    SyntheticProfile,
)
from zeus_nb.optimizer.replay import load_profile_log, replay_optimizer


def sim_run(workload, selector, adaptive, noise, seed, margin):
    system = device.use_simulated(gpu="a40", workload=workload, noise=noise, seed=seed)
    plo = GlobalPowerLimitOptimizer(
        ZeusMonitor(), selector, wait_steps=0, adaptive=adaptive, noise_margin=margin, verbose=False
    )
    while not plo.done:
        plo.on_step_begin()
        zeus_nb.step()
        plo.on_step_end()
    plo.close()
    return plo, system


def noisy_section(noise: float, margin: float, seeds: range) -> None:
    print()
    print(f"simulated A40, {noise:.0%} per-step noise, seeds {span(seeds)} per case:")
    results = {"adaptive": [0, 0, 0, 0.0, 0.0], "exhaustive (other noise)": [0, 0, 0, 0.0, 0.0]}
    for workload in WORKLOADS:
        for sel in selectors():
            for seed in seeds:
                ref, system = sim_run(workload, sel, False, noise, seed, margin)
                exact = []
                for w in ref.power_limits:
                    t, p = system.step_cost(system.batch_size, w)
                    exact.append(PowerLimitMeasurement(w, p * t, t))
                for name, adaptive in (("adaptive", True), ("exhaustive (other noise)", False)):
                    other, _ = sim_run(workload, sel, adaptive, noise, seed + OTHER_NOISE, margin)
                    loss = regret(sel, exact, other.optimal_power_limit, ref.optimal_power_limit)
                    r = results[name]
                    r[0] += 1
                    r[1] += other.optimal_power_limit == ref.optimal_power_limit
                    r[2] += loss > WORSE + 1e-12
                    r[3] += ref.profiling_time
                    r[4] += other.profiling_time
    for name, (n, same, worse, t_ref, t) in results.items():
        print(
            f"  {name:<25} vs exhaustive: identical {same}/{n}, worse by > {WORSE:.0%}: {worse}, "
            f"profiling-time saving {100 * (1 - t / t_ref):.1f}%"
        )


SYNTHETIC_SELECTORS = (Energy(), ZeusCost(0.5), MaxSlowdownConstraint(1.1))


def logged_noise_section(logs, margin: float, warmup: int, steps: int, seeds: range) -> dict:
    """The single-GPU A40 logs as noise-free curves with 1/3/5 % step noise (LoggedProfile).

    Replayed logs have no step-to-step spread, so they only exercise the fixed-margin rules;
    this runs the rules bounded by measured noise on the same real, non-convex curves. Per noise
    level, over the 13 selectors and ``seeds`` seeds: profiling-time saving, worst regret against
    the exhaustive run with the same noise seed (score selectors and all), and how often a choice
    is more than 3% worse, adaptively and for a second exhaustive run with other noise.
    """
    print()
    print(
        f"A40 single-GPU logs with synthetic step noise (13 selectors, seeds {span(seeds)} "
        "per case):"
    )
    print(
        f"  {'noise':>5} {'cases':>5} {'saving':>7} {'worst (score)':>14} {'> 3%':>5} "
        f"{'exh2 > 3%':>10}"
    )
    out = {}
    for noise in (0.01, 0.03, 0.05):
        t_ex = t_ad = 0.0
        worst_score, n, over, floor = -1.0, 0, 0, 0
        for path in logs:
            profile = LoggedProfile.from_log(path, noise, steps)
            exact = profile.exact(steps)
            for sel in selectors():
                for seed in seeds:
                    ex = synthetic_run(profile, sel, False, seed, margin, warmup, steps)
                    ad = synthetic_run(profile, sel, True, seed, margin, warmup, steps)
                    ex2 = synthetic_run(
                        profile, sel, False, seed + OTHER_NOISE, margin, warmup, steps
                    )
                    loss = regret(sel, exact, ad.optimal_power_limit, ex.optimal_power_limit)
                    if not isinstance(sel, MaxSlowdownConstraint):
                        worst_score = max(worst_score, loss)
                    over += loss > WORSE + 1e-12
                    floor += (
                        regret(sel, exact, ex2.optimal_power_limit, ex.optimal_power_limit)
                        > WORSE + 1e-12
                    )
                    n += 1
                    t_ex += ex.profiling_time
                    t_ad += ad.profiling_time
        saving = 100.0 * (1.0 - t_ad / t_ex)
        out[f"{noise:g}"] = {"saving_pct": saving, "worst_score_regret_pct": 100 * worst_score}
        print(
            f"  {noise:>5.0%} {n:>5} {saving:>6.1f}% {100 * worst_score:>13.2f}% {over:>5} "
            f"{floor:>10}"
        )
    return out


SYNTHETIC_LIMITS = range(5, 10)
SYNTHETIC_NOISE = (0.01, 0.03, 0.05)


def synthetic_section(margin: float, warmup: int, steps: int, seeds: range) -> dict[str, dict]:
    """Adaptive vs exhaustive on the synthetic family of zeus_nb.optimizer.power_limit.synthetic.

    Per shape (energy optimum x curve), over 5 to 9 limits, 1/3/5 % step noise, the selectors of
    SYNTHETIC_SELECTORS and ``seeds`` seeds (the same seed for both runs, so both read the same
    steps at every limit they visit): the profiling-time saving and the worst regret, i.e. how
    much worse the adaptive choice is than the exhaustive one on the noise-free criterion
    (MaxSlowdownConstraint: its energy; a broken constraint counts as worse), for all selectors
    and for the two that minimise a score. Then how often each choice is more than 3% worse:
    adaptive vs exhaustive, and as the noise floor, a second exhaustive run with other noise vs
    the first. Last, the same figures over all shapes per limit count, noise level and selector.
    """
    print()
    print(
        f"synthetic profiles (5 to 9 limits, 1/3/5% step noise, {len(SYNTHETIC_SELECTORS)} "
        f"selectors, seeds {span(seeds)} per case):"
    )
    groups: dict[str, Tally] = {}
    for key in (
        *(f"{o}/{c}" for o in OPTIMA for c in CURVES),
        *(f"{n} limits" for n in SYNTHETIC_LIMITS),
        *(f"{noise:.0%} noise" for noise in SYNTHETIC_NOISE),
        *(label(sel) for sel in SYNTHETIC_SELECTORS),
    ):
        groups[key] = Tally()
    for optimum in OPTIMA:
        for curve in CURVES:
            for limits in SYNTHETIC_LIMITS:
                for noise in SYNTHETIC_NOISE:
                    profile = SyntheticProfile(limits, optimum, curve, noise)
                    exact = profile.exact(steps)
                    for sel in SYNTHETIC_SELECTORS:
                        for seed in seeds:
                            ex = synthetic_run(profile, sel, False, seed, margin, warmup, steps)
                            ad = synthetic_run(profile, sel, True, seed, margin, warmup, steps)
                            ex2 = synthetic_run(
                                profile, sel, False, seed + OTHER_NOISE, margin, warmup, steps
                            )
                            loss = regret(
                                sel, exact, ad.optimal_power_limit, ex.optimal_power_limit
                            )
                            loss2 = regret(
                                sel, exact, ex2.optimal_power_limit, ex.optimal_power_limit
                            )
                            for key in (
                                f"{optimum}/{curve}",
                                f"{limits} limits",
                                f"{noise:.0%} noise",
                                label(sel),
                            ):
                                groups[key].add(sel, ex, ad, loss, loss2)
    shapes = {f"{o}/{c}": groups[f"{o}/{c}"] for o in OPTIMA for c in CURVES}
    print(Tally.header("shape"))
    for key, tally in shapes.items():
        print(tally.row(key))
    met = all(t.saving >= 40.0 and t.worst <= WORSE for t in shapes.values())
    verdict = "met" if met else "NOT met"
    print(f"  targets (>= 40% saving and worst regret <= 3% on every shape): {verdict}")
    print(Tally.header("over all shapes"))
    for key, tally in groups.items():
        if key not in shapes:
            print(tally.row(key))
    return {key: tally.summary() for key, tally in groups.items()}


def a40_replay_section(logs, margin: float, warmup: int, steps: int) -> dict:
    """Every shipped A40 log replayed per selector: the table, then saving, identical choices,
    worst regret and cases more than WORSE worse."""
    kw = dict(warmup_steps=warmup, profile_steps=steps)
    rows, same, worse, worst = [], 0, [], 0.0
    print(
        f"{'log':<30} {'selector':<28} {'exh W':>6} {'ada W':>6} {'exh crit':>10} "
        f"{'ada crit':>10} {'exh s':>7} {'ada s':>7} {'exh kJ':>7} {'ada kJ':>7}"
    )
    for path in logs:
        log = load_profile_log(path)
        for sel in selectors():
            ex = replay_optimizer(log, sel, adaptive=False, **kw)
            ad = replay_optimizer(log, sel, adaptive=True, noise_margin=margin, **kw)
            full = ex.measurements
            c_ex, _ = criterion(sel, full, ex.optimal_power_limit)
            c_ad, ok_ad = criterion(sel, full, ad.optimal_power_limit)
            loss = c_ad / c_ex - 1.0 if ok_ad else float("inf")
            worst = max(worst, loss)
            is_worse = loss > WORSE + 1e-12
            same += ex.optimal_power_limit == ad.optimal_power_limit
            if is_worse:
                worse.append(f"{path.name} {sel!r}")
            rows.append((path.name, ex, ad))
            print(
                f"{path.name:<30} {repr(sel):<28.28} {ex.optimal_power_limit:>6g} "
                f"{ad.optimal_power_limit:>6g} {c_ex:>10.1f} {c_ad:>10.1f} "
                f"{ex.profiling_time:>7.1f} {ad.profiling_time:>7.1f} "
                f"{ex.profiling_energy / 1e3:>7.1f} {ad.profiling_energy / 1e3:>7.1f}"
                + ("  WORSE" if is_worse else "")
            )
    print()
    print("profiling-time saving per log:")
    for path in logs:
        ex_t = sum(ex.profiling_time for name, ex, _ in rows if name == path.name)
        ad_t = sum(ad.profiling_time for name, _, ad in rows if name == path.name)
        print(
            f"  {path.name:<30} {ex_t:>8.1f} s -> {ad_t:>8.1f} s ({100 * (1 - ad_t / ex_t):.1f}%)"
        )
    ex_t = sum(ex.profiling_time for _, ex, _ in rows)
    ad_t = sum(ad.profiling_time for _, _, ad in rows)
    ex_e = sum(ex.profiling_energy for _, ex, _ in rows)
    ad_e = sum(ad.profiling_energy for _, _, ad in rows)
    saving_t, saving_e = 100.0 * (1 - ad_t / ex_t), 100.0 * (1 - ad_e / ex_e)
    print()
    print(f"A40 replayed logs (no step noise): {len(rows)} cases")
    print(f"identical choices: {same}/{len(rows)}")
    print(f"worst regret: {100 * worst:.2f}%")
    print(f"adaptive worse than exhaustive by > {WORSE:.0%}: {len(worse)}")
    for w in worse:
        print(f"  worse: {w}")
    print(f"profiling time: exhaustive {ex_t:.1f} s, adaptive {ad_t:.1f} s, saving {saving_t:.1f}%")
    print(
        f"profiling energy: exhaustive {ex_e / 1e3:.1f} kJ, adaptive {ad_e / 1e3:.1f} kJ, "
        f"saving {saving_e:.1f}%"
    )
    met = not worse and saving_t >= 30.0
    print(f"targets (0 worse, >= 30% time saving): {'met' if met else 'NOT met'}")
    return {
        "cases": len(rows),
        "identical": same,
        "worse": len(worse),
        "worst_regret_pct": 100 * worst,
        "time_saving_pct": saving_t,
        "energy_saving_pct": saving_e,
        "targets_met": met,
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--margin", type=float, default=0.05, help="adaptive noise margin")
    ap.add_argument("--warmup-steps", type=int, default=10)
    ap.add_argument("--profile-steps", type=int, default=40)
    ap.add_argument("--json", action="store_true", help="also print a JSON summary line")
    ap.add_argument(
        "--sim-noise", default="0.01,0.05", help="simulated A40 step noise levels; 0 skips them"
    )
    ap.add_argument("--synthetic-seeds", type=int, default=5, help="0 skips synthetic profiles")
    ap.add_argument("--logged-seeds", type=int, default=3, help="0 skips noisy A40 logs")
    ap.add_argument("--v100-seeds", type=int, default=5, help="0 skips V100-shaped profiles")
    ap.add_argument(
        "--seed-base",
        type=int,
        default=TUNING_SEEDS.stop,
        help=f"first noise seed (default {TUNING_SEEDS.stop}: the adaptive rules were set on "
        f"seeds {span(TUNING_SEEDS)}, so the default reports on seeds they never saw)",
    )
    args = ap.parse_args()
    warmup, steps, base = args.warmup_steps, args.profile_steps, args.seed_base

    folder = resources.files("zeus_nb") / "resources" / "zeus_profiles"
    logs = sorted((p for p in folder.iterdir() if p.name.endswith(".csv")), key=lambda p: p.name)
    out = {"a40_replay": a40_replay_section(logs, args.margin, warmup, steps)}
    for noise in (float(x) for x in args.sim_noise.split(",")):
        if noise > 0:
            noisy_section(noise, args.margin, range(base, base + 3))
    if args.logged_seeds > 0:
        single = [p for p in logs if "," not in p.name]
        out["logged_with_noise"] = logged_noise_section(
            single, args.margin, warmup, steps, range(base, base + args.logged_seeds)
        )
    if args.synthetic_seeds > 0:
        out["synthetic"] = synthetic_section(
            args.margin, warmup, steps, range(base, base + args.synthetic_seeds)
        )
    if args.v100_seeds > 0:
        out["v100"] = v100_section(args.margin, warmup, steps, range(base, base + args.v100_seeds))
    if args.json:
        print(json.dumps(out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
