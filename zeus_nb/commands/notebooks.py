"""zeus-nb notebooks: copy the shipped notebooks into a folder of your own.

The packaged notebooks live inside the installed package, which may be read-only and is replaced
on upgrade, so users run and edit a copy. The copy is the student edition (exercise bodies
replaced by a "your turn" line, :func:`zeus_nb.course.edition_text`); ``--solutions`` writes the
instructor edition. Copying never destroys work: a copy the user edited is kept (and reported)
unless ``--force``. A small record (``.zeus-nb-notebooks.json``) holds the hash of each file as
written, so an unedited copy is updated when a newer zeus-nb ships a newer notebook (or the other
edition is asked for), while an edited one is left alone.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path

from zeus_nb.course import edition_text
from zeus_nb.errors import ZeusNbError
from zeus_nb.inputs.args import nonempty
from zeus_nb.inputs.registry import not_input
from zeus_nb.inputs.table import MAX_NOTEBOOK_BYTES, read_bytes, read_text
from zeus_nb.runner.notebooks import list_notebooks
from zeus_nb.runner.paths import notebooks_dir
from zeus_nb.utils.files import atomic_write, unlocked_update

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


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@not_input(
    "the copy record zeus-nb writes itself; unreadable means 'no record' (every copy "
    "is then kept as edited)"
)
def _read_record(dest: Path) -> dict[str, str]:
    try:
        data = json.loads(read_text(dest / RECORD, "copy record"))
    except (OSError, ValueError):
        return {}
    files = data.get("files") if isinstance(data, dict) else None
    return files if isinstance(files, dict) else {}


@not_input("compares the user's copy byte for byte")
@unlocked_update(
    "compares the user's copy with what it would write; two copies at once write the same bytes"
)
def copy_notebooks(
    dest: str | Path, force: bool = False, source: Path | None = None, solutions: bool = False
) -> CopyReport:
    """Write the student edition of the numbered notebooks of ``source`` into ``dest``.

    ``source`` defaults to the shipped notebooks; ``solutions`` writes the instructor edition.
    A file already in ``dest`` is overwritten only if it is what an earlier copy wrote (the user
    did not edit it) or ``force`` is true.
    """

    src_dir = source or notebooks_dir()
    notebooks = list_notebooks(src_dir)
    if not notebooks:
        raise ZeusNbError(f"no notebooks to copy in {src_dir}")
    out = Path(dest)
    if out.exists() and not out.is_dir():
        raise ZeusNbError(f"{out} exists and is not a folder; choose another folder")
    # Every edition is made before anything is written: a notebook that cannot be split leaves
    # the folder as it was.
    texts = {nb.name: edition_text(nb, solutions).encode("utf-8") for nb in notebooks}
    out.mkdir(parents=True, exist_ok=True)
    record = _read_record(out)
    report = CopyReport()
    for nb in notebooks:
        target = out / nb.name
        text = texts[nb.name]
        shipped = _digest(text)
        if not target.exists():
            bucket = report.copied
        else:
            current = _digest(read_bytes(target, "notebook", MAX_NOTEBOOK_BYTES))
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
        atomic_write(target, text)
        record[nb.name] = shipped
        bucket.append(nb.name)
    atomic_write(out / RECORD, json.dumps({"files": record}, indent=1, sort_keys=True) + "\n")
    return report


def print_report(report: CopyReport, dest: Path, solutions: bool = False) -> None:
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
    which = "instructor edition, with solutions" if solutions else "student edition"
    print(f"notebooks ({which}) in {dest}/")


def register(sub) -> None:
    p = sub.add_parser(
        "notebooks",
        help="copy the tutorial notebooks into a folder to run and edit",
        description=(
            "Copy the notebooks that come with zeus-nb into DIR (created if needed), in their "
            "student edition: each exercise's body is a 'your turn' line (--solutions: the "
            "instructor edition). Notebooks you edited there are kept unless --force; unedited "
            "copies are brought up to date."
        ),
    )
    p.add_argument(
        "dir", nargs="?", type=nonempty("path"), default=DEFAULT_DIR, help=f"./{DEFAULT_DIR}"
    )
    p.add_argument("--force", action="store_true", help="also overwrite notebooks you edited")
    add_solutions_flag(p)
    p.set_defaults(func=run)


def add_solutions_flag(parser) -> None:
    """``--solutions``: the instructor edition, for `zeus-nb notebooks` and `zeus-nb lab`."""
    parser.add_argument(
        "--solutions",
        action="store_true",
        help="the instructor edition: exercises keep their solutions (default: student edition)",
    )


def run(args) -> int:
    dest = Path(args.dir)
    report = copy_notebooks(dest, force=args.force, solutions=args.solutions)
    print_report(report, dest, args.solutions)
    return 0
