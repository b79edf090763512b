"""The tutorial site: API pages from docstrings, the assembled sources, and a real browser visit.

The browser test builds the site as `zeus-nb docs build` does (notebooks executed in smoke mode
on the simulated GPU), serves it on 127.0.0.1 and visits every page: in Debian's Chromium, but
for most of the API reference's pages, which share one template and are read over HTTP. It keeps
a screenshot of the energy-time tradeoff notebook's page in ``artifacts/``.
"""

from __future__ import annotations

import functools
import html.parser
import http.server
import json
import os
import threading
import urllib.request
from pathlib import Path
from urllib.parse import urldefrag, urljoin, urlparse

import pytest

from zeus_nb import cli
from zeus_nb.course import edition_text
from zeus_nb.course.check import NOT_DONE
from zeus_nb.docsite import SiteBuildError, apidoc, assemble, build_site

REPO = Path(__file__).resolve().parents[1]
CHROMIUM = Path("/usr/bin/chromium")
ARTIFACTS = REPO / "artifacts"
SOLUTION_MARKER = "# BEGIN SOLUTION"
#: what the pages shown in Chromium get for search/search_index.json (its real one is checked)
EMPTY_SEARCH_INDEX = {
    "config": {"lang": ["en"], "separator": r"[\s\-]+", "pipeline": []},
    "docs": [],
}


# --- API reference ------------------------------------------------------------------------------
def documented(x: int, label: str = "a") -> list[str]:
    """Repeat ``label``; see :func:`zeus_nb.runner.paths.notebooks_dir`.

    Args:
        x: how many times,
            at least zero.
        label: what to repeat.
    """
    return [label] * x


_MARKER = object()


def with_callable_default(check=lambda v: True, marker=_MARKER) -> None:
    """Defaults whose repr holds a memory address."""


class Widget:
    """A thing."""

    def grow(self, by: float) -> float:
        """Grow ``by``."""
        return by

    @property
    def size(self) -> int:
        """The size."""
        return 1

    def _hidden(self) -> None:
        """Private."""


def test_docstrings_become_markdown():
    text = apidoc.markdown_docstring(documented)
    assert "Repeat `label`; see `zeus_nb.runner.paths.notebooks_dir`." in text
    assert "- `x`: how many times, at least zero." in text
    assert "- `label`: what to repeat." in text
    assert "**Args**" in text


def test_module_page_lists_what_the_module_defines(monkeypatch):
    page = apidoc.module_page(__name__)
    assert "documented(x: int, label: str = 'a') -> list[str]" in page  # no quoted annotations
    assert "## `Widget`" in page and "#### `Widget.grow`" in page
    assert "#### `Widget.size` (property)" in page and "The size." in page
    assert "_hidden" not in page
    # no memory address in a default: two builds write the same page
    assert "with_callable_default(check=<function <lambda>>, marker=<object object>)" in page
    assert " at 0x" not in page
    # imported names are documented where they are defined, not here
    assert "## `SiteBuildError`" not in page and "## `Path`" not in page


def test_public_modules_skip_private_and_command_modules():
    names = apidoc.public_modules()
    expected = {"zeus_nb", "zeus_nb.monitor", "zeus_nb.runner.paths", "zeus_nb.device.sim"}
    assert expected <= set(names)
    assert not [n for n in names if "._" in n or n.startswith(apidoc.SKIP)]


# --- assembled sources --------------------------------------------------------------------------
def test_assembled_sources_and_nav(tmp_path):
    nav, report = assemble(REPO, tmp_path, execute=False)
    shipped = sorted(p.name for p in (REPO / "notebooks").glob("[0-9][0-9]_*.ipynb"))
    guides = sorted(p.name for p in (REPO / "docs").glob("*.md"))
    assert report.notebooks == shipped and report.guides == guides
    sections = {k: v for item in nav for k, v in item.items()}
    assert sections["Home"] == "index.md"
    assert [next(iter(e.values())) for e in sections["Tutorials"]] == [
        f"notebooks/{n}" for n in shipped
    ]
    assert [next(iter(e.values())) for e in sections["Guides"]] == [f"docs/{g}" for g in guides]
    assert {"Architecture"} <= {next(iter(e)) for e in sections["Guides"]}
    # the class kit: overview, syllabus, instructor guide, then a page listing every slide deck
    course = [next(iter(e.values())) for e in sections["Course"]]
    kit = REPO / "docs" / "course"
    assert course[:3] == [
        f"docs/course/{n}" for n in ("README.md", "syllabus.md", "instructor-guide.md")
    ]
    assert set(course[:-1]) == {f"docs/course/{p.name}" for p in kit.glob("*.md")}
    assert course[-1] == "docs/course/slides/index.md"
    decks = sorted(p.name for p in (kit / "slides").glob("*.slides.html"))
    assert len(decks) == len(shipped)
    listing = (tmp_path / course[-1]).read_text()
    assert [d for d in decks if f"]({d})" in listing] == decks
    assert report.course == [c.removeprefix("docs/course/") for c in course]
    # the notebooks are the student edition: what `zeus-nb notebooks` hands out, no solution
    for name in shipped:
        page = (tmp_path / "notebooks" / name).read_text()
        assert page == edition_text(REPO / "notebooks" / name)
        assert SOLUTION_MARKER in (REPO / "notebooks" / name).read_text()
        assert SOLUTION_MARKER not in page and "your turn" in page
    api = [next(iter(e.values())) for e in sections["API reference"]]
    assert "api/zeus_nb.monitor.md" in api
    assert all((tmp_path / p).is_file() for p in api)
    assert (tmp_path / "index.md").read_text() == (REPO / "README.md").read_text()


def _mkdocs_config() -> dict:
    import yaml

    class Loader(yaml.SafeLoader):
        pass

    Loader.add_multi_constructor("", lambda *_: None)  # mkdocs' !ENV tags and the like
    return yaml.load((REPO / "mkdocs.yml").read_text(), Loader=Loader)


def test_mkdocs_config_loads_nothing_from_the_web():
    cfg = _mkdocs_config()
    assert cfg["theme"]["name"] == "material" and cfg["theme"]["font"] is False
    plugins = [p if isinstance(p, str) else next(iter(p)) for p in cfg["plugins"]]
    assert not {"social", "privacy", "material/social", "material/privacy"} & set(plugins)


def test_only_ipynb_files_are_notebooks_to_the_site(tmp_path, monkeypatch):
    """mkdocs-jupyter as configured takes .ipynb files as notebooks and leaves Markdown pages and
    .py files alone, without parsing them (by default it reads each with jupytext, several times a
    build, and renders one with a notebook header as a notebook)."""
    import jupytext
    from mkdocs.structure.files import File
    from mkdocs_jupyter.plugin import Plugin

    options = next(
        p["mkdocs-jupyter"] for p in _mkdocs_config()["plugins"] if "mkdocs-jupyter" in p
    )
    (tmp_path / "page.md").write_text(
        "---\njupyter:\n  kernelspec:\n    display_name: Python 3\n    language: python\n"
        "    name: python3\n---\n\n# A page\n"
    )
    (tmp_path / "nb.ipynb").write_text("{}")
    (tmp_path / "script.py").write_text("# %% [markdown]\n# A percent-format script\n")
    reads: list[str] = []
    read = jupytext.read
    monkeypatch.setattr(jupytext, "read", lambda path, *a, **k: reads.append(path) or read(path))

    def notebooks(config: dict) -> list[str]:
        plugin = Plugin()
        errors, _ = plugin.load_config(config)
        assert not errors
        files = [
            File(n, str(tmp_path), str(tmp_path / "site"), False)
            for n in ("page.md", "script.py", "nb.ipynb")
        ]
        return [f.src_uri for f in files if plugin.should_include(f)]

    assert notebooks(options) == ["nb.ipynb"] and reads == []
    # the plugin's default: the page parsed and taken for a notebook, and so is any .py file
    default = {k: v for k, v in options.items() if k != "ignore"}
    assert notebooks(default) == ["page.md", "script.py", "nb.ipynb"]
    assert reads == [str(tmp_path / "page.md")]


def test_executed_copies_must_be_todays_student_edition(tmp_path):
    """`docs build --executed` takes executed notebooks only if they are the student edition of
    the notebooks as they are now (a stale run, or the instructor edition, is refused)."""
    import nbformat

    from zeus_nb.docsite import copy_executed, write_editions

    fresh = write_editions(tmp_path / "executed")
    copied = copy_executed(tmp_path / "executed", tmp_path / "site")
    assert [p.name for p in copied] == [p.name for p in fresh]
    stale = nbformat.read(fresh[0], as_version=4)
    stale.cells[-1].source += "\n# changed since"
    nbformat.write(stale, fresh[0])
    with pytest.raises(SiteBuildError, match="not the student edition of today's"):
        copy_executed(tmp_path / "executed", tmp_path / "site2")
    write_editions(tmp_path / "instructor", solutions=True)
    with pytest.raises(SiteBuildError, match="not the student edition"):
        copy_executed(tmp_path / "instructor", tmp_path / "site3")


def test_docs_build_outside_a_checkout_says_what_is_needed(monkeypatch, tmp_path):
    from zeus_nb.runner import paths

    monkeypatch.setattr(paths, "source_checkout", lambda: None)
    with pytest.raises(SiteBuildError, match="source checkout"):
        build_site(tmp_path / "site")


# --- the built site in a browser ----------------------------------------------------------------
@pytest.fixture(scope="module")
def served_site(tmp_path_factory, student_editions):
    """The site built with executed notebooks, served on 127.0.0.1.

    The notebooks are the session's one run of the student editions (tests/tour_fixture.py),
    executed exactly as `zeus-nb docs build` executes them, so the site test does not run the
    six notebooks again. Built from an empty working folder, which must stay empty: the build
    writes to its output folder only (no MkDocs or mkdocs-jupyter cache in whatever folder it
    runs from).
    """
    executed, run = student_editions
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-3000:]
    site = tmp_path_factory.mktemp("site") / "site"
    cwd = tmp_path_factory.mktemp("cwd")
    before = os.getcwd()
    os.chdir(cwd)  # contextlib.chdir needs Python 3.11
    try:
        assert cli.main(["docs", "build", str(site), "--executed", str(executed)]) == 0
    finally:
        os.chdir(before)
    assert not list(cwd.iterdir()), (
        f"the build left files in its working folder: {list(cwd.iterdir())}"
    )
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(site))
    handler.log_message = lambda *a: None
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/", site
    finally:
        server.shutdown()


class _LinksAndImages(html.parser.HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.links: list[str] = []
        self.images: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        if tag == "a" and found.get("href"):
            self.links.append(found["href"])
        elif tag == "img" and found.get("src"):
            self.images.append(found["src"])


def _read_over_http(url: str, base: str) -> tuple[set[str], list[str]]:
    """A page read without a browser: its internal links, and what is broken (page, images)."""
    try:
        with urllib.request.urlopen(url, timeout=10) as r:
            parser = _LinksAndImages()
            parser.feed(r.read().decode("utf-8"))
    except (OSError, UnicodeDecodeError) as e:
        return set(), [f"{url}: {e}"]
    broken = []
    for src in parser.images:
        target = urljoin(url, src)
        if urlparse(target).hostname != "127.0.0.1":
            broken.append(f"{url}: image {src[:80]} is not on the site")
            continue
        try:
            with urllib.request.urlopen(target, timeout=10) as r:
                if not r.read():
                    broken.append(f"{url}: image {src[:80]} is empty")
        except OSError as e:
            broken.append(f"{url}: image {src[:80]} did not load ({e})")
    links = {urldefrag(urljoin(url, h))[0] for h in parser.links}
    return {u for u in links if u.startswith(base)}, broken


def _internal_links(page, base: str) -> set[str]:
    hrefs = page.eval_on_selector_all("a[href]", "els => els.map(e => e.href)")
    return {urldefrag(h)[0] for h in hrefs if h.startswith(base) and urldefrag(h)[0]}


@pytest.mark.browser
@pytest.mark.slow
@pytest.mark.skipif(
    not CHROMIUM.exists(), reason="needs Debian's Chromium: apt-get install chromium"
)
def test_every_page_loads_with_working_links_and_images(served_site):
    sync_api = pytest.importorskip("playwright.sync_api")
    base, site = served_site
    pages = {p.relative_to(site).as_posix() for p in site.rglob("*.html")} - {"404.html"}
    external: set[str] = set()
    seen: set[str] = set()
    broken: list[str] = []
    decks: list[str] = []
    # Material's search builds its index from search_index.json in a web worker on each page
    # load: over the 35 pages shown here that took 38.7 s of CPU of one Chromium process
    # (2026-12-06, process accounting of the idle suite), and a third of this call (25.6 s alone
    # against 16.6 s without it). The index is checked once here, then the pages get an empty one.
    search_url = base + "search/search_index.json"
    with urllib.request.urlopen(search_url, timeout=10) as r:
        indexed = {urldefrag(d["location"])[0] for d in json.load(r)["docs"]}
    unindexed = {p for p in pages if not p.endswith(".slides.html")} - indexed
    assert not unindexed, f"pages the search index lacks: {sorted(unindexed)[:10]}"
    with sync_api.sync_playwright() as pw:
        browser = pw.chromium.launch(
            executable_path=str(CHROMIUM), args=["--no-sandbox", "--headless", "--disable-gpu"]
        )
        page = browser.new_page(viewport={"width": 1400, "height": 1000})

        def offline(route):  # the site must not need the web: record and refuse
            url = route.request.url
            if urlparse(url).hostname != "127.0.0.1":
                external.add(url)
                return route.abort()
            if url == search_url:  # the index, checked above, in a small stand-in (see there)
                return route.fulfill(json=EMPTY_SEARCH_INDEX)
            return route.continue_()

        page.route("**/*", offline)
        queue = [base + "index.html"]
        # Every guide, notebook and deck in Chromium; of the ~220 API pages (one template, about
        # 0.4 s each in the browser) the first few, the rest over HTTP (a millisecond each)
        api_in_browser = 4
        while queue:
            url = queue.pop()
            if url in seen:
                continue
            seen.add(url)
            if "/docs/course/slides/" in url and url.endswith(".slides.html"):
                # a reveal.js deck: shown, with reveal.js from beside it (the route above
                # records anything it would fetch from elsewhere)
                response = page.goto(url)
                try:
                    page.wait_for_function("window.Reveal && Reveal.isReady()", timeout=20_000)
                except Exception:
                    broken.append(f"{url}: reveal.js did not start")
                if response is None or response.status != 200:
                    broken.append(f"{url}: HTTP {response.status if response else 'none'}")
                decks.append(url)
                continue
            if "/api/" in url and api_in_browser <= 0:
                # the other API pages share one template: read over HTTP, links and images alike
                found, bad = _read_over_http(url, base)
                broken += bad
                queue += [u for u in found if u not in seen]
                continue
            api_in_browser -= "/api/" in url
            response = page.goto(url)
            if response is None or response.status != 200:
                broken.append(f"{url}: HTTP {response.status if response else 'no response'}")
                continue
            images = page.eval_on_selector_all(
                "img", "els => els.map(e => [e.src.slice(0, 80), e.complete && e.naturalWidth])"
            )
            broken += [f"{url}: image {src} did not load" for src, ok in images if not ok]
            notebook_page = "/notebooks/" in url and url.endswith(".html")
            if notebook_page:  # the student edition, executed: exercises unsolved
                html = page.content()
                if NOT_DONE not in html or SOLUTION_MARKER in html:
                    broken.append(f"{url}: not the student edition")
            queue += [u for u in _internal_links(page, base) if u not in seen]
        visited = {u[len(base) :] for u in seen}
        assert pages <= visited, f"pages no link leads to: {sorted(pages - visited)}"
        assert not broken, "\n".join(broken)
        assert not external, f"the site fetched from the web: {sorted(external)}"
        assert len(decks) == len(list((REPO / "docs/course/slides").glob("*.slides.html")))

        # the energy-time tradeoff figure, scrolled into view, for people to look at
        [tradeoff] = [p for p in pages if p.startswith("notebooks/03_")]
        page.goto(base + tradeoff)
        figure = page.locator(".jp-RenderedImage img, .jp-OutputArea-output img").first
        figure.scroll_into_view_if_needed()
        box = figure.bounding_box()
        assert box and box["width"] > 300 and box["height"] > 200
        page.wait_for_timeout(500)  # the header's title switch on scrolling is animated
        ARTIFACTS.mkdir(exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / "site-tradeoff.png"))
        browser.close()
