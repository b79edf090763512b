"""reveal.js and require.js next to the slide decks, so a deck opens with no network.

The files come from the npm registry once, at build time (``npm pack`` into a cache folder), and
are copied beside the decks: ``reveal.js/`` (the library, its stylesheet, the white theme and the
speaker-notes plugin) and ``require.js`` (the loader nbconvert's template starts reveal.js with).
Nothing is fetched when a deck is shown. The theme's web-font import is dropped (the fonts are
1.8 MB); the theme's own fallback, Helvetica or the system's sans-serif, is used instead.
"""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
import tarfile
from pathlib import Path

from zeus_nb.course.markers import CourseError
from zeus_nb.inputs.env import env
from zeus_nb.inputs.registry import system_read
from zeus_nb.utils.files import writes_itself

log = logging.getLogger(__name__)

REVEAL = ("reveal.js", "4.6.1")
REQUIREJS = ("requirejs", "2.3.8")
STAMP = "reveal.js/VERSIONS"
# (npm package, file in its tarball) -> path beside the decks
FILES: dict[tuple[str, str], str] = {
    ("reveal.js", "package/dist/reveal.js"): "reveal.js/dist/reveal.js",
    ("reveal.js", "package/dist/reveal.css"): "reveal.js/dist/reveal.css",
    ("reveal.js", "package/dist/theme/white.css"): "reveal.js/dist/theme/white.css",
    ("reveal.js", "package/plugin/notes/notes.js"): "reveal.js/plugin/notes/notes.js",
    ("reveal.js", "package/LICENSE"): "reveal.js/LICENSE",
    ("requirejs", "package/require.js"): "require.js",
}


def cache_dir() -> Path:
    """Where the npm tarballs are kept: ``$ZEUS_NB_CACHE_DIR/npm`` or ``~/.cache/zeus-nb/npm``."""
    base = env("ZEUS_NB_CACHE_DIR") or Path.home() / ".cache" / "zeus-nb"
    return Path(base) / "npm"


def _stamp() -> str:
    return f"{REVEAL[0]} {REVEAL[1]}\n{REQUIREJS[0]} {REQUIREJS[1]}\n"


def _tarball(name: str, version: str, cache: Path) -> Path:
    """The package's tarball in ``cache``, fetched with ``npm pack`` when missing."""
    path = cache / f"{name}-{version}.tgz"
    if path.is_file():
        return path
    npm = shutil.which("npm")
    if npm is None:
        raise CourseError(
            f"the slides need {name} {version}, fetched once from the npm registry with "
            "`npm pack`, but npm is not installed: install it (apt-get install npm), or pass "
            "--reveal-url to load reveal.js from a web address instead"
        )
    cache.mkdir(parents=True, exist_ok=True)
    log.info("fetching %s %s from the npm registry into %s", name, version, cache)
    run = subprocess.run(
        [npm, "pack", f"{name}@{version}", "--silent"],
        cwd=cache,
        capture_output=True,
        text=True,
        timeout=300,
    )
    if run.returncode != 0 or not path.is_file():
        detail = (run.stderr or run.stdout).strip().splitlines()[-1:] or ["no output"]
        raise CourseError(
            f"`npm pack {name}@{version}` failed ({detail[0]}); check the network and npm's "
            "registry setting, or pass --reveal-url"
        )
    return path


@system_read("a file of the reveal.js or require.js package that npm fetched, copied byte for byte")
def _member(tarball: Path, member: str) -> bytes:
    with tarfile.open(tarball, "r:gz") as tar:
        found = tar.extractfile(member)
        if found is None:
            raise CourseError(f"{tarball.name} has no {member}; delete it so it is fetched again")
        return found.read()


def _without_font_import(css: bytes) -> bytes:
    lines = css.decode("utf-8").splitlines(keepends=True)
    return "".join(ln for ln in lines if not ln.lstrip().startswith("@import")).encode("utf-8")


@system_read("its own stamp of the vendored package versions")
@writes_itself("the slides' copy of reveal.js and require.js, made afresh when its stamp differs")
def vendor(out_dir: str | os.PathLike, cache: Path | None = None) -> list[Path]:
    """Put reveal.js and require.js into ``out_dir`` (kept if already there); the files."""
    out = Path(out_dir)
    targets = [out / rel for rel in FILES.values()]
    stamp = out / STAMP
    if stamp.is_file() and stamp.read_text() == _stamp() and all(p.is_file() for p in targets):
        return targets
    cache = cache or cache_dir()
    tarballs = {name: _tarball(name, version, cache) for name, version in (REVEAL, REQUIREJS)}
    for (package, member), rel in FILES.items():
        data = _member(tarballs[package], member)
        if rel.endswith("theme/white.css"):
            data = _without_font_import(data)
        target = out / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
    stamp.write_text(_stamp())
    return targets
