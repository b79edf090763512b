"""Time ``zeus-nb tour --smoke``: every notebook executed headless on the simulated backend.

Target: under 5 minutes in total on 2 cores. Prints each notebook's seconds and the total
(``--json``: one object). Runs in a fresh temporary directory, so nothing is reused.

    python benchmarks/bench_tour.py [--json] [--full]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TARGET_S = 300.0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--full", action="store_true", help="full runs instead of --smoke")
    args = ap.parse_args()
    env = dict(os.environ, ZEUS_NB_BACKEND="sim")
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH")) if p)
    cmd = [sys.executable, "-m", "zeus_nb", "tour", "-o", "out"] + (
        [] if args.full else ["--smoke"]
    )
    with tempfile.TemporaryDirectory() as tmp:
        start = time.monotonic()
        out = subprocess.run(cmd, cwd=tmp, env=env, capture_output=True, text=True)
        total = time.monotonic() - start
    per = {
        m[1]: float(m[2])
        for m in re.finditer(r"^(\d\d_\w+) \((?:ok|FAILED)[^\d]*([\d.]+) s", out.stdout, re.M)
    }
    result = {
        "mode": "full" if args.full else "smoke",
        "cpus": os.cpu_count(),
        "notebooks": per,
        "total_s": round(total, 1),
        "target_s": TARGET_S,
        "ok": out.returncode == 0,
    }
    if args.json:
        print(json.dumps(result))
    else:
        for name, s in per.items():
            print(f"{name:28s} {s:6.1f} s")
        print(f"{'total':28s} {total:6.1f} s (target {TARGET_S:.0f} s, {os.cpu_count()} CPUs)")
        if out.returncode:
            print(out.stdout[-2000:] + out.stderr[-2000:])
    return out.returncode


if __name__ == "__main__":
    sys.exit(main())
