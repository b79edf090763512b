"""The tutorial site: executed notebooks, the guides in ``docs/`` and an API reference.

``zeus-nb docs build`` assembles a MkDocs source folder from a source checkout and builds it
with MkDocs Material and mkdocs-jupyter (see ``docs/site.md`` for why these tools):

* ``index.md``: the README;
* ``docs/*.md``: the guides, unchanged (so the README's links to them keep working);
* ``docs/course/``: the class kit (syllabus, instructor guide, a page listing the slide decks);
* ``notebooks/*.ipynb``: the student edition of every notebook (exercise bodies are "your turn"
  lines, as a student gets them), executed headless in smoke mode on the simulated GPU, with its
  outputs and figures;
* ``api/*.md``: one page per public module, generated from the docstrings.

Everything happens offline: the notebooks run on the simulated backend, and the theme is
configured to load no web fonts or other remote assets (``mkdocs.yml``).
"""

from __future__ import annotations

import contextlib
import html
import logging
import os
import re
import shutil
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from tqdm.auto import tqdm

from zeus_nb.course import write_edition
from zeus_nb.errors import ZeusNbError
from zeus_nb.inputs import read_ipynb
from zeus_nb.inputs.jsonschema_formats import skip_iri_grammar
from zeus_nb.inputs.registry import environ_read, not_input, system_read
from zeus_nb.runner.notebooks import list_notebooks, run_notebook
from zeus_nb.utils.environ import temp_environ
from zeus_nb.utils.files import writes_itself

log = logging.getLogger(__name__)


class SiteBuildError(ZeusNbError):
    """The site could not be built (no checkout, a failing notebook, a MkDocs error)."""


@dataclass
class SiteBuild:
    """What :func:`build_site` produced."""

    site_dir: Path
    notebooks: list[str] = field(default_factory=list)
    api_modules: list[str] = field(default_factory=list)
    guides: list[str] = field(default_factory=list)
    course: list[str] = field(default_factory=list)  # pages of docs/course/, slides/index.md


@not_input("the project's own guides (docs build from a checkout)")
@system_read("the project's own guides (docs build from a checkout)")
def _title(path: Path) -> str:
    """The first markdown ``# heading`` of a page or notebook, else the file's stem."""
    if path.suffix == ".ipynb":
        skip_iri_grammar()
        import nbformat

        texts = [
            c.source for c in nbformat.read(path, as_version=4).cells if c.cell_type == "markdown"
        ]
    else:
        texts = [path.read_text()]
    for text in texts:
        if m := re.search(r"^#\s+(.+?)\s*$", text, re.M):
            return m.group(1).replace("`", "")
    return path.stem.replace("_", " ")


@environ_read("saves variables to restore them afterwards")
@contextlib.contextmanager
def _environ(**changes: str) -> Iterator[None]:
    saved = {k: os.environ.get(k) for k in changes}
    os.environ.update(changes)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def write_editions(dest: Path, solutions: bool = False) -> list[Path]:
    """The student edition (``solutions``: instructor edition) of each shipped notebook."""

    return write_edition(dest, solutions, list_notebooks())


def execute_notebooks(
    dest: Path, timeout: float | None = 600, solutions: bool = False
) -> list[Path]:
    """Run the student edition of every shipped notebook, smoke mode, simulated GPU, into ``dest``.

    The student edition runs to the end with its exercises unsolved (each says so in one line
    and the notebook goes on with the reference answer), so the pages show what a student sees
    and no solution. Widget state is dropped from the outputs: a static page cannot run the
    controls, and keeping it would make each page load a widget manager from the web.
    """

    dest.mkdir(parents=True, exist_ok=True)

    done = []
    with (
        tempfile.TemporaryDirectory(prefix="zeus-nb-editions-") as tmp,
        _environ(ZEUS_NB_BACKEND="sim"),
        temp_environ(MPLBACKEND=None),  # the kernel's inline backend: figures become outputs
    ):
        editions = write_editions(Path(tmp), solutions)
        bar = tqdm(editions, desc="docs: executing notebooks", unit="notebook")
        for nb in bar:  # minutes each: a bar, and the notebook's name on it
            bar.set_postfix_str(nb.name)
            log.info("executing %s", nb.name)
            res = run_notebook(nb, dest / nb.name, {"smoke": True}, dest, timeout=timeout)
            if not res.ok:
                raise SiteBuildError(
                    f"{nb.name} failed, so the site would show an error: {res.error} "
                    f"(the executed copy is {res.output})"
                )
            clean_executed(res.output)
            done.append(res.output)
    return done


@not_input("a notebook execute_notebooks just wrote")
def clean_executed(path: Path) -> None:
    """An executed notebook as a page shows it: no widget state (a static page cannot run the
    controls, and keeping it would make the page load a widget manager from the web) and no
    records sidecar beside it."""
    skip_iri_grammar()
    import nbformat

    executed = read_ipynb(path, "executed notebook")
    executed.metadata.pop("widgets", None)
    describe_figures(executed, path.stem)
    nbformat.write(executed, path)
    path.with_suffix(".records.json").unlink(missing_ok=True)


IMAGE_TYPES = ("image/png", "image/jpeg")


def describe_figures(nb, name: str) -> int:
    """Give every figure output alt text; how many got one.

    The site's notebook template (JupyterLab's, through mkdocs-jupyter) writes no ``alt`` for an
    image output, whatever its metadata says, so a screen reader gets nothing and nbconvert warns
    "Alternative text is missing" once per page. Each figure becomes an HTML ``<img>`` (which the
    template prefers to the bare image) named by the section it appears in and its place there.
    """
    section, count, done = _title_of(nb) or name, {}, 0
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            if m := re.search(r"^#{1,6}\s+(.+?)\s*$", cell.source, re.M):
                section = m.group(1).replace("`", "").replace("*", "")
            continue
        for output in cell.get("outputs", []):
            data = output.get("data", {})
            kind = next((k for k in IMAGE_TYPES if k in data), None)
            if kind is None or "text/html" in data:
                continue
            count[section] = count.get(section, 0) + 1
            alt = html.escape(f'Figure {count[section]} under "{section}" in notebook {name}')
            encoded = "".join(data[kind].split())
            data["text/html"] = f'<img src="data:{kind};base64,{encoded}" alt="{alt}">'
            done += 1
    return done


def _title_of(nb) -> str | None:
    for cell in nb.cells:
        if cell.cell_type == "markdown" and (m := re.search(r"^#\s+(.+?)\s*$", cell.source, re.M)):
            return m.group(1).replace("`", "")
    return None


@not_input(
    "executed notebooks, compared cell by cell with today's student edition; anything"
    " else is refused"
)
@writes_itself("the site's build folder, made afresh by each build")
def copy_executed(source: Path, dest: Path) -> list[Path]:
    """The executed student edition of every shipped notebook, taken from ``source`` (a folder
    :func:`execute_notebooks` filled, e.g. once per test session) instead of executing again.

    Each copy must be the student edition of today's notebook: same code cells, in order, as
    :func:`write_editions` writes, so a stale or instructor copy is refused.
    """
    dest.mkdir(parents=True, exist_ok=True)
    done = []
    with tempfile.TemporaryDirectory(prefix="zeus-nb-editions-") as tmp:
        for edition in write_editions(Path(tmp)):
            found = Path(source) / edition.name
            if not found.is_file():
                raise SiteBuildError(f"{found}: no executed copy of {edition.name}")
            want = [c.source for c in read_ipynb(edition, "student edition").cells]
            got = read_ipynb(found, "executed notebook")
            mine = [
                c.source
                for c in got.cells
                if "injected-parameters" not in c.metadata.get("tags", [])
            ]
            if mine != want:
                raise SiteBuildError(
                    f"{found} is not the student edition of today's {edition.name}: execute "
                    "it again (zeus_nb.docsite.execute_notebooks)"
                )
            target = dest / edition.name
            shutil.copyfile(found, target)
            clean_executed(target)
            done.append(target)
    return done


def _sidecars(folder: Path) -> None:
    """Remove anything but notebooks that running them left beside them."""
    for p in folder.iterdir():
        if p.suffix != ".ipynb":
            shutil.rmtree(p) if p.is_dir() else p.unlink()


COURSE_ORDER = ("README.md", "syllabus.md", "instructor-guide.md")
SLIDES_INDEX = "index.md"


@writes_itself("the site's build folder, made afresh by each build")
def _slides_page(slides: Path, notebooks: list[Path]) -> Path | None:
    """A page listing the reveal.js decks in ``slides`` (``NN_name.slides.html``), if any."""
    decks = sorted(slides.glob("*.slides.html")) if slides.is_dir() else []
    if not decks:
        return None
    titles = {p.stem: _title(p) for p in notebooks}
    lines = [
        "# Slides",
        "",
        "One reveal.js deck per notebook, built from the executed notebook with its plots, "
        "exercises shown as students get them, by `zeus-nb course slides` (see the "
        "[course kit](../README.md)). Arrow keys move between slides. reveal.js sits beside "
        "the decks, so they need no internet.",
        "",
    ]
    for deck in decks:
        stem = deck.name.removesuffix(".slides.html")
        lines.append(f"- [{titles.get(stem, stem.replace('_', ' '))}]({deck.name})")
    page = slides / SLIDES_INDEX
    page.write_text("\n".join(lines) + "\n")
    return page


def _course_pages(course: Path, notebooks: list[Path]) -> list[Path]:
    """The class kit's pages in reading order: overview, syllabus, guide, others, slides."""
    if not course.is_dir():
        return []

    def order(p: Path) -> tuple[int, str]:
        known = p.name in COURSE_ORDER
        return (COURSE_ORDER.index(p.name) if known else len(COURSE_ORDER), p.name)

    pages = sorted(course.glob("*.md"), key=order)
    slides = _slides_page(course / "slides", notebooks)
    return pages + ([slides] if slides else [])


@not_input("the project's own guides (docs build from a checkout)")
@system_read("the project's own guides (docs build from a checkout)")
@writes_itself("the site's build folder, made afresh by each build")
def assemble(
    checkout: Path, src: Path, execute: bool = True, executed: Path | None = None
) -> tuple[list, SiteBuild]:
    """Fill ``src`` with the site's pages; the MkDocs ``nav`` and what went in.

    ``executed``: a folder of executed student editions to show instead of executing them here.
    """
    from zeus_nb.docsite import apidoc

    report = SiteBuild(site_dir=Path())
    (src / "index.md").write_text((checkout / "README.md").read_text())
    shutil.copytree(checkout / "docs", src / "docs")
    guides = sorted((src / "docs").glob("*.md"))
    nb_dir = src / "notebooks"
    if executed is not None:
        copy_executed(Path(executed), nb_dir)
    elif execute:
        execute_notebooks(nb_dir)
        _sidecars(nb_dir)
    else:  # the student edition unexecuted (fast, for checking the site's structure)
        write_editions(nb_dir)
    notebooks = sorted(nb_dir.glob("*.ipynb"))
    course = _course_pages(src / "docs" / "course", notebooks)
    api = apidoc.write_pages(src / "api")
    report.notebooks = [p.name for p in notebooks]
    report.guides = [p.name for p in guides]
    report.course = [p.relative_to(src / "docs" / "course").as_posix() for p in course]
    report.api_modules = [name for name, _ in api]

    def rel(p: Path) -> str:
        return p.relative_to(src).as_posix()

    nav = [
        {"Home": "index.md"},
        {"Tutorials": [{_title(p): rel(p)} for p in notebooks]},
        {"Guides": [{_title(p): rel(p)} for p in guides]},
        *([{"Course": [{_title(p): rel(p)} for p in course]}] if course else []),
        {"API reference": [{name: f"api/{page}"} for name, page in api]},
    ]
    return nav, report


def build_site(
    site_dir: str | Path,
    execute: bool = True,
    strict: bool = True,
    keep_src: Path | None = None,
    executed: str | Path | None = None,
) -> SiteBuild:
    """Build the tutorial site into ``site_dir`` from this source checkout.

    ``strict`` turns MkDocs warnings (a link to a missing page) into an error. ``keep_src``
    keeps the assembled MkDocs source folder there for inspection. ``executed``: a folder of
    executed student editions (:func:`execute_notebooks`) to show instead of executing the
    notebooks again.
    """
    from mkdocs.commands.build import build
    from mkdocs.config import load_config
    from mkdocs.exceptions import MkDocsException

    from zeus_nb.runner.paths import source_checkout

    checkout = source_checkout()
    if checkout is None or not (checkout / "mkdocs.yml").is_file():
        raise SiteBuildError(
            "the site is built from a source checkout (it needs docs/ and mkdocs.yml): "
            "git clone the repository, pip install -e '.[dev]' there and run zeus-nb docs build"
        )
    site = Path(site_dir).resolve()
    with tempfile.TemporaryDirectory(prefix="zeus-nb-site-") as tmp:
        src = Path(keep_src).resolve() if keep_src else Path(tmp) / "src"
        if src.exists():
            shutil.rmtree(src)
        src.mkdir(parents=True)
        nav, report = assemble(
            checkout, src, execute=execute, executed=Path(executed) if executed else None
        )
        cfg = load_config(
            config_file=str(checkout / "mkdocs.yml"),
            docs_dir=str(src),
            site_dir=str(site),
            nav=nav,
            strict=strict,
        )
        try:
            build(cfg)
        except (MkDocsException, SystemExit) as e:
            raise SiteBuildError(f"MkDocs could not build the site: {e}") from e
    report.site_dir = site
    return report
