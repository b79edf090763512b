"""zeus-nb doctor"""

from __future__ import annotations

from zeus_nb.device.doctor import diagnose


def register(sub) -> None:
    p = sub.add_parser("doctor", help="list GPUs, backend and permissions; changes nothing")
    p.add_argument("--backend", choices=["auto", "sim", "nvml"], default=None)
    p.set_defaults(func=run)


def run(args) -> int:
    report = diagnose(args.backend)
    print(report)
    return 0 if report.usable else 1
