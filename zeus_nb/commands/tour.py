"""zeus-nb tour"""

from __future__ import annotations

import json
import math
import sys
import time

from zeus_nb.errors import InputError
from zeus_nb.inputs.args import nonempty, seconds
from zeus_nb.inputs.validate import writable_dir
from zeus_nb.runner.execute import TIMEOUT_HELP
from zeus_nb.runner.notebooks import find_notebook, list_notebooks, run_notebook
from zeus_nb.runner.record_units import unit_of
from zeus_nb.runner.records import read_notebook


def register(sub) -> None:
    p = sub.add_parser(
        "tour",
        help="execute every shipped notebook headless and print what each one recorded",
        description=(
            "Execute the numbered notebooks in order with papermill, headless, on the default "
            "backend (a real GPU if NVML finds one, else the simulated GPU), and print the results "
            "each notebook recorded. Executed notebooks go to the output directory."
        ),
    )
    p.add_argument("--smoke", action="store_true", help="small, fast runs (smoke=True)")
    p.add_argument(
        "-o",
        "--output-dir",
        type=nonempty("path"),
        default="zeus-nb-tour",
        help="default: ./zeus-nb-tour",
    )
    p.add_argument(
        "--only",
        type=nonempty("list"),
        default=None,
        help="comma-separated notebook numbers, e.g. 01,03",
    )
    p.add_argument("--timeout", type=seconds, default=None, help=TIMEOUT_HELP)
    p.set_defaults(func=run)


WIDTH = 90  # characters a value may take on its line
LINE = 120  # characters a record's line may take with its unit


def _rounded(value):
    """Floats to 4 significant digits, for reading; the notebook's record keeps every digit."""
    if isinstance(value, float) and math.isfinite(value):
        return float(f"{value:.4g}")
    if isinstance(value, dict):
        return {k: _rounded(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_rounded(v) for v in value]
    return value


def _short(value) -> str:
    """A record as one readable line: rounded, and summarised rather than cut when long."""
    value = _rounded(value)
    text = json.dumps(value)
    if len(text) <= WIDTH:
        return text
    if isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
        return f"a table of {len(value)} rows ({', '.join(value[0])}; see the notebook)"
    if isinstance(value, list) and all(isinstance(v, int | float) for v in value):
        return f"{len(value)} values from {min(value)} to {max(value)}"
    if isinstance(value, list):
        return f"{len(value)} items, first {json.dumps(value[0])} (see the notebook)"
    if isinstance(value, dict):
        names, shown = [str(k) for k in value], []
        while names and len(", ".join([*shown, names[0]])) < WIDTH - 40:
            shown.append(names.pop(0))
        more = f" and {len(names)} more" if names else ""
        return f"{len(value)} entries: {', '.join(shown)}{more} (see the notebook)"
    shown = value if isinstance(value, str) else text
    return f"{shown[: WIDTH - 40]}… ({len(shown)} characters; see the notebook)"


def run(args) -> int:
    if args.only:
        notebooks = [find_notebook(n.strip()) for n in args.only.split(",") if n.strip()]
    else:
        notebooks = list_notebooks()
    if not notebooks:
        raise InputError("no notebooks to run")
    out_dir = writable_dir(args.output_dir, "-o")
    params = {"smoke": True} if args.smoke else {}
    mode = "smoke" if args.smoke else "full"
    print(f"tour ({mode}): {len(notebooks)} notebook(s) -> {out_dir}/", flush=True)
    start = time.monotonic()
    failed = []
    for i, nb in enumerate(notebooks, start=1):
        print(f"\n[{i}/{len(notebooks)}] {nb.stem}: running ...", flush=True)
        res = run_notebook(nb, out_dir / nb.name, params, timeout=args.timeout)
        status = f"ok, {res.seconds:.1f} s" if res.ok else f"FAILED after {res.seconds:.1f} s"
        print(f"{nb.stem} ({status})", flush=True)
        if not res.ok:
            failed.append(nb.stem)
            print(f"  {res.error}", flush=True)
        if res.output.exists():
            records = read_notebook(res.output)["records"]
            takeaway = records.pop("takeaway", None)
            if takeaway:
                print(f"  takeaway: {takeaway}", flush=True)
            for name, value in records.items():
                line, unit = f"  {name} = {_short(value)}", unit_of(name, nb.stem)
                if unit and len(line) + len(unit) + 3 > LINE:  # its own line, under the value
                    line += f"\n      ({unit})"
                elif unit:  # text has none
                    line += f" ({unit})"
                print(line, flush=True)
            if res.ok and not records:
                print("  (recorded nothing)", flush=True)
    total = time.monotonic() - start
    print(f"\n{len(notebooks) - len(failed)}/{len(notebooks)} notebook(s) ran in {total:.0f} s")
    if failed:
        print(f"failed: {', '.join(failed)} (see the outputs in {out_dir}/)", file=sys.stderr)
        return 1
    return 0
