"""The Python packages the notebooks need, checked the way they fail, each with its fix.

A broken package fails late and far from its cause: a torch and a torchvision from different
builds (torch from PyTorch's CPU index, torchvision from PyPI, say) import torch fine, then
``import torchvision`` raises ``RuntimeError: operator torchvision::nms does not exist`` inside a
notebook or a torchrun rank. :func:`check` tries every import the notebooks need in a fresh
interpreter (a failing import cannot break the caller) and compares torch's and torchvision's
versions; ``zeus-nb doctor`` prints its findings. :func:`explain` turns such an exception, caught
by the error boundary of :mod:`zeus_nb.utils.boundary`, into its cause and fix instead of "a bug
in zeus-nb".
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
import traceback
from dataclasses import dataclass, field
from importlib import metadata

CPU_INDEX = "https://download.pytorch.org/whl/cpu"

# module -> (distribution on PyPI, what the notebooks use it for)
NOTEBOOK_IMPORTS: dict[str, tuple[str, str]] = {
    "torch": ("torch", "every notebook's training step"),
    "torchvision": ("torchvision", "the models and datasets (notebooks 01, 03, 05, 06)"),
    "numpy": ("numpy", "every notebook"),
    "pandas": ("pandas", "every notebook's tables"),
    "matplotlib": ("matplotlib", "every figure"),
    "scipy": ("scipy", "the pipeline frontier solver (notebook 06)"),
    "lowtime": ("lowtime", "the reference frontier solver (notebook 06)"),
    "IPython": ("ipython", "displays in the notebooks"),
    "ipywidgets": ("ipywidgets", "the sliders and Run buttons"),
    "ipykernel": ("ipykernel", "the notebooks' Python kernel"),
    "papermill": ("papermill", "zeus-nb tour, sweep and course"),
    "nbformat": ("nbformat", "zeus-nb tour, sweep and course"),
    "filelock": ("filelock", "the batch-size optimizer's store"),
    "tqdm": ("tqdm", "progress bars"),
}

COMPILED = ("torch", "torchvision")  # imported for real by check(), in a fresh interpreter

_TRY_IMPORTS = """
import importlib, json, sys
found = {}
for name in sys.argv[1:]:
    try:
        importlib.import_module(name)
        found[name] = None
    except BaseException as e:
        found[name] = f"{type(e).__name__}: {' '.join(str(e).split())[:300]}"
print(json.dumps(found))
"""


@dataclass
class StackReport:
    """What :func:`check` found: a line per fact and a problem (with its fix) per fault."""

    lines: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


def _version(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def _split(version: str) -> tuple[tuple[int, ...], str]:
    """("2.13.0+cpu") -> ((2, 13, 0), "cpu"); no local tag: ""."""
    public, _, local = version.partition("+")
    numbers = tuple(int(n) for n in re.findall(r"\d+", public)[:3])
    return numbers, local


def torchvision_for(torch_version: str) -> str | None:
    """The torchvision minor series built for a torch release ("0.29" for torch 2.14)."""
    (major, minor, *_), _ = _split(torch_version)
    if major == 2:
        return f"0.{minor + 15}"
    if major == 1 and minor >= 8:
        return f"0.{minor + 1}"
    return None


def pair_problem(torch_version: str, vision_version: str) -> str | None:
    """Why a torch and a torchvision version do not go together, with the fix; None if they do.

    torchvision's compiled operators are built against one torch release and one build (CPU or
    a CUDA version, the local tag after "+"): a different release or build fails at import.
    """
    (t_nums, t_local), (v_nums, v_local) = _split(torch_version), _split(vision_version)
    expected = torchvision_for(torch_version)
    release_ok = expected is None or ".".join(map(str, v_nums[:2])) == expected
    # no local tag is PyPI's default build, a CUDA one on Linux: it may be either CUDA tag,
    # but never "cpu"
    untagged = "" in (t_local, v_local)
    build_ok = t_local == v_local or (untagged and "cpu" not in (t_local, v_local))
    if release_ok and build_ok:
        return None
    base = ".".join(map(str, t_nums))
    want = f"torchvision=={expected}.*" if expected else "the torchvision of the same release"
    why = []
    if not release_ok:
        why.append(f"torchvision {expected} goes with torch {base}")
    if not build_ok:
        why.append(
            f"torch is a {t_local or 'default (PyPI)'} build, torchvision a "
            f"{v_local or 'default (PyPI)'} build"
        )
    cpu = t_local == "cpu" or v_local == "cpu"
    pip = f"{sys.executable} -m pip"
    pair = f"'torch=={base}' '{want}'"
    if cpu:
        # PyTorch's CPU index is often unreachable where PyPI is (a proxy, a local mirror): give
        # the fix that needs it as such, and one that takes both from pip's usual sources
        fix = (
            f"install the pair from one source: the CPU pair from PyTorch's own index (needs "
            f"{CPU_INDEX} to be reachable): {pip} install --force-reinstall {pair} --index-url "
            f"{CPU_INDEX}; or, without that index, PyPI's default (CUDA) pair, larger but it "
            f"runs on a CPU too: {pip} uninstall -y torch torchvision && {pip} install torch "
            f"torchvision"
        )
    else:
        fix = f"install the pair from one source: {pip} install {pair}"
    return (
        f"torch {torch_version} and torchvision {vision_version} do not match "
        f"({'; '.join(why)}), which makes importing torchvision fail with `operator "
        f"torchvision::nms does not exist`: {fix}"
    )


def _installed(module: str) -> tuple:
    """What an import of ``module`` would load, as far as it can be told without importing it:
    its file and that file's size and modification time (a reinstall rewrites it)."""
    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        return (module, None)
    origin = spec.origin if spec is not None else None
    try:
        st = os.stat(origin) if origin else None
    except OSError:
        st = None
    return (module, origin, st and (st.st_size, st.st_mtime_ns))


#: try_imports' answers in this process, by what the imports would load: a fresh interpreter
#: importing torch and torchvision takes 4 s of CPU, and a process (a test worker, a kernel
#: calling doctor again) asks again with nothing installed in between.
_tried: dict[tuple, dict[str, str | None]] = {}


def try_imports(modules: list[str], timeout: float = 300.0) -> dict[str, str | None]:
    """Import each module in a fresh interpreter: None if it imports, else its error line.
    Asked again in this process with the same files installed, the same answer."""
    key = (sys.executable, *(_installed(m) for m in modules))
    if key in _tried:
        return dict(_tried[key])
    run = subprocess.run(
        [sys.executable, "-c", _TRY_IMPORTS, *modules],
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    try:
        found = json.loads(run.stdout.strip().splitlines()[-1])
    except (IndexError, ValueError):
        detail = (run.stderr.strip().splitlines() or ["no output"])[-1]
        return dict.fromkeys(modules, f"the import check itself failed: {detail}")
    _tried[key] = found
    return dict(found)


def _fix_for(module: str) -> str:
    dist, _ = NOTEBOOK_IMPORTS[module]
    wanted = next(
        (
            r.split(";")[0].strip()
            for r in (metadata.requires("zeus-nb") or [])
            if re.match(rf"{re.escape(dist)}\b", r, re.I) and "extra ==" not in r
        ),
        dist,
    )
    return f"pip install '{wanted}' (or reinstall zeus-nb: pip install -e .)"


def check(timeout: float = 300.0) -> StackReport:
    """The notebooks' imports and the torch/torchvision pair, as lines and fixes (the two
    compiled packages are imported in a fresh interpreter, the others looked up)."""
    report = StackReport()
    torch_v, vision_v = _version("torch"), _version("torchvision")
    if torch_v and vision_v:
        problem = pair_problem(torch_v, vision_v)
        verdict = "do not match" if problem else "a matching pair"
        report.lines.append(f"torch {torch_v}, torchvision {vision_v}: {verdict}")
        if problem:
            report.problems.append(problem)
    # torch and torchvision load compiled code that can fail on import: import them for real;
    # the others are found or not
    found = try_imports(list(COMPILED), timeout)
    for module in NOTEBOOK_IMPORTS:
        if module not in COMPILED and importlib.util.find_spec(module) is None:
            found[module] = f"ModuleNotFoundError: No module named '{module}'"
    failed = {m: e for m, e in found.items() if e}
    works = len(NOTEBOOK_IMPORTS) - len(failed)
    report.lines.append(
        f"packages the notebooks need: {works} of {len(NOTEBOOK_IMPORTS)} work "
        f"({', '.join(COMPILED)} imported, the others found)"
    )
    for module, error in failed.items():
        _, use = NOTEBOOK_IMPORTS[module]
        if module == "torchvision" and torch_v and vision_v and report.problems:
            continue  # the pair's problem above says why and what to do
        report.problems.append(f"import {module} fails ({error}); it is needed for {use}: "
                               f"{_fix_for(module)}")  # fmt: skip
    return report


def _imported_package(e: BaseException) -> str | None:
    """The third-party package whose import raised ``e``, if it was raised during one."""
    for frame in reversed(traceback.extract_tb(e.__traceback__)):
        if frame.name != "<module>":
            continue
        match = re.search(r"[/\\](?:site|dist)-packages[/\\]([A-Za-z_][\w]*)", frame.filename)
        if match and match.group(1) != "zeus_nb":
            return match.group(1)
    return None


def explain(e: BaseException) -> str | None:
    """The cause and fix of an exception a broken installation raised, or None.

    Known: torch and torchvision from different releases or builds (``operator torchvision::...
    does not exist``), and any exception raised while a third-party package was being imported.
    """
    text = " ".join(str(e).split())
    package = _imported_package(e)
    torchvision_op = re.search(r"operator torchvision::\w+ does not exist", text)
    if torchvision_op or package in ("torch", "torchvision"):
        torch_v, vision_v = _version("torch"), _version("torchvision")
        problem = pair_problem(torch_v, vision_v) if torch_v and vision_v else None
        if problem:
            return problem
    if package is None and not torchvision_op:
        return None
    what = package or "torchvision"
    return (
        f"importing {what} failed ({type(e).__name__}: {text[:200]}): the installed {what} "
        f"is broken or does not fit the packages beside it; run `zeus-nb doctor`, which checks "
        f"every package the notebooks import and says how to fix it"
    )
