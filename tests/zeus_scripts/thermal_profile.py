"""Thermally stable profiling in the shape of Zeus's documented ``zeus.profile`` usage.

Only its imports name zeus_nb. The work is a plain CPU function; with no GPU here the simulated
GPU on the wall clock (``ZEUS_NB_BACKEND=sim ZEUS_NB_SIM_CLOCK=wall``) measures it. The
durations are tiny so the script runs in seconds; on a real GPU use seconds-long ones.
"""

import argparse
import logging

from zeus_nb.monitor import ZeusMonitor
from zeus_nb.profile import measure, profile_parameters


def target_function() -> None:
    """One iteration of the workload."""
    sum(i * i for i in range(5_000))


def main(argv=None):
    parser = argparse.ArgumentParser()
    parser.add_argument("--measurement-durations", type=float, nargs="+", default=[0.02, 0.05])
    parser.add_argument("--cooldown-durations", type=float, nargs="+", default=[0.0, 0.01])
    parser.add_argument("--num-trials", type=int, default=2)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO)

    zeus_monitor = ZeusMonitor(gpu_indices=[0])
    measurement_report, cooldown_report = profile_parameters(
        target_function,
        zeus_monitor,
        measurement_duration_search_range=args.measurement_durations,
        cooldown_duration_search_range=args.cooldown_durations,
        num_trials=args.num_trials,
        num_warmup_trials=1,
        num_warmup_iterations=2,
        num_calibration_iterations=20,
    )
    print(measurement_report)
    print(cooldown_report)

    result = measure(
        target_function,
        zeus_monitor,
        measurement_duration=max(args.measurement_durations),
        cooldown_duration=max(args.cooldown_durations),
    )
    print(
        f"{result.iterations} iterations: {result.energy_per_iter:.4f} J and "
        f"{result.time_per_iter * 1000:.3f} ms per iteration"
    )
    return measurement_report, cooldown_report, result


if __name__ == "__main__":
    main()
