"""zeus-nb notebooks: copy the shipped notebooks into a folder of your own.

The packaged notebooks live inside the installed package, which may be read-only and is replaced
on upgrade, so users run and edit a copy. Copying never destroys work: a copy the user edited is
kept (and reported) unless ``--force``. A small record (``.zeus-nb-notebooks.json``) holds the
hash of each file as copied, so an unedited copy is updated when a newer zeus-nb ships a newer
notebook, while an edited one is left alone.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from zeus_nb.errors import ZeusNbError

DEFAULT_DIR = "zeus-nb-notebooks"
RECORD = ".zeus-nb-notebooks.json"


@dataclass
class CopyReport:
    """What :func:`copy_notebooks` did to each notebook, by file name."""

    copied: list[str] = field(default_factory=list)  # new in the folder
    updated: list[str] = field(default_factory=list)  # unedited copy of an older release
    replaced: list[str] = field(default_factory=list)  # edited copy overwritten (--force)
    unchanged: list[str] = field(default_factory=list)  # already identical
    skipped: list[str] = field(default_factory=list)  # edited copy kept


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _read_record(dest: Path) -> dict[str, str]:
    try:
        data = json.loads((dest / RECORD).read_text())
    except (OSError, ValueError):
        return {}
    files = data.get("files") if isinstance(data, dict) else None
    return files if isinstance(files, dict) else {}


def copy_notebooks(dest: str | Path, force: bool = False, source: Path | None = None) -> CopyReport:
    """Copy the numbered notebooks from ``source`` (default: the shipped ones) into ``dest``.

    A file already in ``dest`` is overwritten only if it is what an earlier copy wrote (the user
    did not edit it) or ``force`` is true.
    """
    from zeus_nb.notebooks import list_notebooks
    from zeus_nb.paths import notebooks_dir

    src_dir = source or notebooks_dir()
    notebooks = list_notebooks(src_dir)
    if not notebooks:
        raise ZeusNbError(f"no notebooks to copy in {src_dir}")
    out = Path(dest)
    if out.exists() and not out.is_dir():
        raise ZeusNbError(f"{out} exists and is not a folder; choose another folder")
    out.mkdir(parents=True, exist_ok=True)
    record = _read_record(out)
    report = CopyReport()
    for nb in notebooks:
        target = out / nb.name
        shipped = _digest(nb)
        if not target.exists():
            bucket = report.copied
        else:
            current = _digest(target)
            if current == shipped:
                report.unchanged.append(nb.name)
                record[nb.name] = shipped
                continue
            if record.get(nb.name) == current:
                bucket = report.updated
            elif force:
                bucket = report.replaced
            else:
                report.skipped.append(nb.name)
                continue
        shutil.copyfile(nb, target)
        record[nb.name] = shipped
        bucket.append(nb.name)
    (out / RECORD).write_text(json.dumps({"files": record}, indent=1, sort_keys=True) + "\n")
    return report


def print_report(report: CopyReport, dest: Path) -> None:
    """One line per kind of action, and the skipped notebooks by name with the way out."""
    for label, names in (
        ("copied", report.copied),
        ("updated to this release", report.updated),
        ("replaced (--force)", report.replaced),
        ("already up to date", report.unchanged),
    ):
        if names:
            print(f"{label}: {', '.join(names)}")
    for name in report.skipped:
        print(f"skipped {dest / name}: you edited it; --force replaces it with the shipped one")
    print(f"notebooks in {dest}/")


def register(sub) -> None:
    p = sub.add_parser(
        "notebooks",
        help="copy the tutorial notebooks into a folder to run and edit",
        description=(
            "Copy the notebooks that come with zeus-nb into DIR (created if needed). Notebooks "
            "you edited there are kept unless --force; unedited copies are brought up to date."
        ),
    )
    p.add_argument("dir", nargs="?", default=DEFAULT_DIR, help=f"default: ./{DEFAULT_DIR}")
    p.add_argument("--force", action="store_true", help="also overwrite notebooks you edited")
    p.set_defaults(func=run)


def run(args) -> int:
    dest = Path(args.dir)
    print_report(copy_notebooks(dest, force=args.force), dest)
    return 0
