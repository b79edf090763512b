"""zeus-nb demo"""

from __future__ import annotations

from zeus_nb import device
from zeus_nb.inputs.args import count, nonempty, real
from zeus_nb.inputs.validate import POWER_LIMIT
from zeus_nb.monitor import ZeusMonitor


def register(sub) -> None:
    p = sub.add_parser("demo", help="measure a short simulated training run, epoch by epoch")
    p.add_argument("--epochs", type=count(1, 10**4), default=3)
    p.add_argument(
        "--gpu",
        type=nonempty("name"),
        default="a40",
        help="simulated GPU: a40, v100 or a power-trace CSV",
    )
    p.add_argument(
        "--workload",
        type=nonempty("name"),
        default="cifar100",
        help="traced workload (dataset name)",
    )
    p.add_argument(
        "--power-limit", type=real(POWER_LIMIT), default=None, help="W (default: the maximum)"
    )
    p.set_defaults(func=run)


def run(args) -> int:
    system = device.use_simulated(gpu=args.gpu, workload=args.workload)
    monitor = ZeusMonitor(gpu_indices=[0])
    if args.power_limit is not None:
        system.gpu(0).set_power_limit(args.power_limit)
    steps = system.steps_per_epoch()
    print(
        f"{system.gpus[0].name}: {system.workload}/{system.network}, batch size "
        f"{system.batch_size}, {steps} steps per epoch, power limit "
        f"{system.gpus[0].get_power_limit():g} W"
    )
    for epoch in range(args.epochs):
        monitor.begin_window("epoch")
        device.step(steps)  # one call per epoch: the work is bounded by --epochs alone
        m = monitor.end_window("epoch")
        print(f"epoch {epoch}: {m.time:.2f} s, {m.total_energy:.1f} J ({m.average_power:.1f} W)")
    return 0
