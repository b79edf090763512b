"""A real browser: JupyterLab headless, Debian's Chromium via Playwright, all cells run.

Needs ``/usr/bin/chromium`` (``apt-get install -y chromium``); never downloads a browser.
Keeps a screenshot in ``artifacts/``.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import secrets
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
CHROMIUM = Path("/usr/bin/chromium")
ARTIFACTS = REPO / "artifacts"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--headless",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]

pytestmark = [
    pytest.mark.browser,
    pytest.mark.slow,
    pytest.mark.skipif(
        not CHROMIUM.exists(), reason="needs Debian's Chromium: apt-get install -y chromium"
    ),
]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _notebook(prefix: str = "02") -> Path:
    nbs = REPO / "notebooks"
    found = sorted(nbs.glob(f"{prefix}_*.ipynb")) or sorted(nbs.glob("01_*.ipynb"))
    return found[0]


#: the notebooks the tests open (parametrize ``lab`` indirectly with one; 02 without)
LAB_NOTEBOOKS = ("01", "02", "03", "06")


@pytest.fixture(scope="module")
def lab_server(tmp_path_factory):
    """JupyterLab on 127.0.0.1 with a token, serving the student edition of each notebook in
    :data:`LAB_NOTEBOOKS` in smoke mode (what `zeus-nb lab` opens: exercises unsolved, so Run
    All also shows that it runs to the end before any exercise is done). One server for the
    module's tests: a start costs 3 s of CPU. Yields (base URL, token, notebook by number)."""
    from zeus_nb.course import edition_text

    tmp = tmp_path_factory.mktemp("lab")
    root = tmp / "root"
    root.mkdir()
    notebooks = {}
    for number in LAB_NOTEBOOKS:
        src = _notebook(number)
        text = edition_text(src).replace("smoke: bool = False", "smoke: bool = True")
        assert "your turn" in text
        assert "smoke: bool = True" in text
        (root / src.name).write_text(text)
        notebooks[number] = src
    token, port = secrets.token_hex(16), _free_port()
    env = dict(os.environ)
    env.update(
        PYTHONPATH=os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH", "")) if p),
        ZEUS_NB_BACKEND="sim",
        JUPYTER_CONFIG_DIR=str(tmp / "config"),
        JUPYTER_RUNTIME_DIR=str(tmp / "runtime"),
        JUPYTERLAB_WORKSPACES_DIR=str(tmp / "workspaces"),
        JUPYTERLAB_SETTINGS_DIR=str(tmp / "settings"),
    )
    env.pop("ZEUS_NB_HEADLESS", None)
    cmd = [
        sys.executable,
        "-m",
        "jupyterlab",
        "--no-browser",
        "--ServerApp.open_browser=False",
        "--ServerApp.ip=127.0.0.1",
        f"--ServerApp.port={port}",
        "--ServerApp.port_retries=0",
        f"--IdentityProvider.token={token}",
        f"--ServerApp.root_dir={root}",
        "--LabApp.expose_app_in_browser=True",
        "--LabApp.news_url=",
        "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
    ]
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        cmd.append("--allow-root")
    log = (tmp / "lab.log").open("w")
    proc = subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while True:
        try:
            with urllib.request.urlopen(f"{base}/api/status?token={token}", timeout=2):
                break
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                pytest.fail("JupyterLab did not start:\n" + (tmp / "lab.log").read_text())
            time.sleep(0.3)
    try:
        yield base, token, notebooks
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


@pytest.fixture
def lab(lab_server, request):
    """(the URL that opens one notebook in JupyterLab, its stem): 02 unless the test is
    parametrized indirectly with another number. Each test opens it in a workspace of its own
    (no tab of an earlier test's restored), and its kernels are shut down after it."""
    base, token, notebooks = lab_server
    src = notebooks[getattr(request, "param", "02")]
    workspace = re.sub(r"\W+", "-", request.node.name)
    yield f"{base}/lab/workspaces/{workspace}/tree/{src.name}?token={token}", src.stem
    for kind in ("sessions", "kernels"):  # a session's end shuts its kernel down
        with urllib.request.urlopen(f"{base}/api/{kind}?token={token}", timeout=10) as r:
            ids = [item["id"] for item in json.load(r)]
        for item in ids:
            end = urllib.request.Request(f"{base}/api/{kind}/{item}?token={token}", method="DELETE")
            try:
                with urllib.request.urlopen(end, timeout=60):
                    pass
            except urllib.error.HTTPError as e:
                if e.code != 404:  # gone with its session already
                    raise


@pytest.fixture(scope="module")
def chromium():
    """One Chromium for the module's tests; each test opens its pages in a context of its own
    (:func:`_page`), which shares nothing with another's."""
    sync_api = pytest.importorskip("playwright.sync_api")
    with sync_api.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            yield browser
        finally:
            browser.close()


@contextlib.contextmanager
def _page(browser, width: int = 1400, height: int = 1000):
    """A page in a fresh browser context (cookies, storage), closed with it."""
    context = browser.new_context(viewport={"width": width, "height": height})
    try:
        yield context.new_page()
    finally:
        context.close()


# The notebook's kernel is connected and idle: from then on no "Select Kernel" dialog comes. On
# a cold server the kernel specs load late, and a run started before this can be cut part-way
# by that dialog (the later cells then miss the imports of the lost ones).
KERNEL_READY = (
    "() => { const w = window.jupyterapp && window.jupyterapp.shell.currentWidget;"
    " const sc = w && w.sessionContext;"
    " return !!(sc && sc.isReady && sc.session && sc.session.kernel"
    " && sc.session.kernel.status === 'idle'); }"
)

# fire and forget: the command's promise settles only when every cell has run
RUN_ALL = "() => { window.jupyterapp.commands.execute('notebook:run-all-cells'); return true; }"


def _accept_dialogs(page) -> None:
    """Accept JupyterLab's dialogs (e.g. a late "Select Kernel") that would block clicks."""
    accept = page.locator(".jp-Dialog .jp-mod-accept")
    for _ in range(3):
        if not accept.count() or not accept.first.is_visible():
            return
        accept.first.click()
        page.wait_for_timeout(300)


def _counted_cells(page) -> int:
    """Code cells whose prompt shows an execution count like ``[3]:``."""
    return page.evaluate(
        """() => [...document.querySelectorAll('.jp-CodeCell .jp-InputPrompt')]
              .filter(p => /\\[\\d+\\]/.test(p.textContent)).length"""
    )


def _open_and_run_all(page, url: str) -> None:
    """Open the notebook, wait for its kernel, run all cells; fail on a traceback."""
    page.goto(url)
    page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=60_000)
    deadline = time.monotonic() + 120
    while not page.evaluate(KERNEL_READY):
        assert time.monotonic() < deadline, "the notebook's kernel never became ready"
        _accept_dialogs(page)
        page.wait_for_timeout(500)
    idle = ".jp-Notebook-ExecutionIndicator[data-status='idle']"
    # the first run command can be lost while the kernel starts: retry once idle
    deadline = time.monotonic() + 90
    while _counted_cells(page) == 0:
        assert time.monotonic() < deadline, "no cell ever ran"
        _accept_dialogs(page)
        page.wait_for_selector(idle, timeout=60_000)
        page.evaluate(RUN_ALL)
        page.wait_for_timeout(2000)
    total = page.locator(".jp-CodeCell").count()
    deadline = time.monotonic() + 240
    last, stalled_since, retries = -1, time.monotonic(), 0
    while (done := _counted_cells(page)) < total:
        errors = page.locator(".jp-RenderedText[data-mime-type='application/vnd.jupyter.stderr']")
        tracebacks = [t for t in errors.all_inner_texts() if "Traceback" in t or "Error" in t]
        assert not tracebacks, tracebacks[0][:2000]
        assert time.monotonic() < deadline, f"{done}/{total} cells ran"
        _accept_dialogs(page)
        if done != last:
            last, stalled_since = done, time.monotonic()
        elif page.locator(idle).count() and time.monotonic() - stalled_since > 5:
            # an idle kernel with cells left: the run was cut short (e.g. by a late
            # kernel selection); run all again
            assert retries < 3, f"run all stopped {retries + 1} times at {done}/{total}"
            retries += 1
            page.evaluate(RUN_ALL)
            stalled_since = time.monotonic()
        page.wait_for_timeout(1000)
    # a cell shows its count before its last output arrives: wait (bounded) for an idle kernel
    while not page.evaluate(KERNEL_READY):
        assert time.monotonic() < deadline, "the kernel stayed busy after every cell ran"
        page.wait_for_timeout(300)


def _set_slider(page, slider, value: float) -> None:
    """Type ``value`` into an ipywidgets slider's editable readout (as a person can)."""
    readout = slider.locator(".widget-readout")
    readout.scroll_into_view_if_needed()
    readout.click()
    page.keyboard.press("Control+A")
    page.keyboard.type(f"{value:g}")
    page.keyboard.press("Enter")


def _image_of(box) -> str | None:
    """The ``src`` of the first figure in ``box`` (a data URL: it changes with the figure)."""
    img = box.locator("img").first
    img.wait_for(timeout=60_000)
    return img.get_attribute("src")


def _explore_two_power_limits(page):
    """Run the power-limit explorer at its starting limit, then at another; return its slider.

    Each run's status names the limit it used, and the plot changes (it overlays the runs).
    """
    slider = page.locator(".zeus-nb-power-limit")
    slider.wait_for(state="visible", timeout=30_000)
    assert "Power limit" in slider.inner_text()
    start = float(slider.locator(".widget-readout").inner_text())
    other = 150 if start != 150 else 200
    # the Run button trains one epoch at the slider's limit with a live plot
    panel = page.locator(".widget-vbox", has=slider).last
    _accept_dialogs(page)
    panel.get_by_role("button", name="Run").click()
    panel.get_by_text(re.compile(rf"{start:g} W: (\d+)/\1 steps,")).wait_for(timeout=60_000)
    first_plot = _image_of(panel)
    # a second run at another limit: the status names it and the plot changes
    _set_slider(page, slider, other)
    panel.get_by_role("button", name="Run").click()
    panel.get_by_text(re.compile(rf"{other:g} W: (\d+)/\1 steps,")).wait_for(timeout=60_000)
    assert f"{start:g} W:" not in panel.inner_text()
    assert _image_of(panel) != first_plot
    return slider


def test_notebook_runs_in_jupyterlab_with_widget(lab, chromium):
    url, stem = lab
    ARTIFACTS.mkdir(exist_ok=True)
    shot = ARTIFACTS / f"browser-{stem}.png"
    with _page(chromium) as page:
        try:
            _open_and_run_all(page, url)
            slider = _explore_two_power_limits(page)
            slider.scroll_into_view_if_needed()
            page.screenshot(path=str(shot))
            # the selector picker says what is picked, and that the next cell applies it
            choice = page.locator(".zeus-nb-selector-choice").first
            choice.scroll_into_view_if_needed(timeout=30_000)
            choice.wait_for(state="visible", timeout=30_000)
            picker = page.locator(".widget-vbox", has=choice).last
            picker.locator("select").first.select_option(label="ZeusCost")
            # the knob slider: the line names the value the next cell will use
            knob = picker.locator(".widget-slider").first
            _set_slider(page, knob, 0.25)
            choice.filter(has_text="eta_knob=0.25").wait_for(timeout=30_000)
            before = choice.inner_text()
            picker.locator("select").first.select_option(label="Energy")
            choice.filter(has_text="Picked Energy").wait_for(timeout=30_000)
            assert choice.inner_text() != before and "next cell" in choice.inner_text()
        except Exception:
            page.screenshot(path=str(ARTIFACTS / f"browser-{stem}-failed.png"))
            raise
    assert shot.stat().st_size > 10_000


@pytest.mark.parametrize("lab", ["03"], indirect=True)
def test_eta_knob_slider_redraws_the_choice_in_place(lab, chromium):
    """Notebook 03: moving eta_knob changes the least-cost line under it, showing the value used."""
    url, stem = lab
    ARTIFACTS.mkdir(exist_ok=True)
    with _page(chromium) as page:
        try:
            _open_and_run_all(page, url)
            slider = page.locator(".widget-slider", has_text="eta_knob").first
            slider.wait_for(state="visible", timeout=30_000)
            box = page.locator(".widget-vbox", has=slider).last
            box.get_by_text("eta_knob=1.00").wait_for(timeout=30_000)
            _set_slider(page, slider, 0)
            box.get_by_text("eta_knob=0.00").wait_for(timeout=30_000)
            assert "eta_knob=1.00" not in box.inner_text()
            page.screenshot(path=str(ARTIFACTS / f"browser-{stem}.png"))
        except Exception:
            page.screenshot(path=str(ARTIFACTS / f"browser-{stem}-failed.png"))
            raise


def _run_in_browser(lab, browser, check) -> None:
    """Open the lab's notebook in Chromium, run all cells, then ``check(page)``; screenshot."""
    url, stem = lab
    ARTIFACTS.mkdir(exist_ok=True)
    with _page(browser) as page:
        try:
            _open_and_run_all(page, url)
            check(page)
            page.screenshot(path=str(ARTIFACTS / f"browser-{stem}.png"))
        except Exception:
            page.screenshot(path=str(ARTIFACTS / f"browser-{stem}-failed.png"))
            raise


@pytest.mark.parametrize("lab", ["01"], indirect=True)
def test_power_limit_explorer_overlays_runs_at_the_limits_used(lab, chromium):
    """Notebook 01: the explorer runs at the slider's limit, says which, and redraws its plot;
    an off-by-one answer gets its own hint, and the result line under a failed check names the
    reference's value as the reference's."""

    def check(page) -> None:
        _explore_two_power_limits(page).scroll_into_view_if_needed()
        marker, last = "def energy_per_step(", "return "
        then = "J per step over"  # the result line, printed after the check's line
        out = _answer(page, marker, "return m.total_energy / (steps - 1)", last, "Hint", then)
        assert "not by one less" in out and "energy per second" not in out
        assert "the reference energy_per_step gives" in out and "your energy_per_step" not in out
        out = _answer(page, marker, "return m.total_energy / steps", "return m.total", "✓", then)
        assert "your energy_per_step gives" in out

    _run_in_browser(lab, chromium, check)


# --- exercises answered in the browser ------------------------------------------------------

SET_ANSWER = """(args) => {
    const nb = window.jupyterapp.shell.currentWidget.content;
    const i = nb.widgets.findIndex(c => c.model.sharedModel.getSource().includes(args.marker));
    if (i < 0) { return -1; }
    const model = nb.widgets[i].model.sharedModel;
    const lines = model.getSource().split('\\n');
    const stub = lines.findIndex(l => l.includes('NotImplementedError') || l.includes(args.last));
    const indent = lines[stub].match(/^ */)[0];
    lines[stub] = args.body.split('\\n').map(l => indent + l).join('\\n');
    model.setSource(lines.join('\\n'));
    nb.activeCellIndex = i;
    window.jupyterapp.commands.execute('notebook:run-cell');
    return i;
}"""


# The text of a cell's outputs (index >= 0) or of all cells', from the notebook's model: JupyterLab
# renders only the cells in view, so the page's DOM does not hold them all.
OUTPUT_TEXT = """(index) => {
    const cells = window.jupyterapp.shell.currentWidget.content.model.cells;
    const texts = [];
    for (let i = 0; i < cells.length; i++) {
        if (index >= 0 && i !== index) { continue; }
        for (const o of (cells.get(i).toJSON().outputs || [])) {
            const t = o.text || (o.data && o.data['text/plain']) || '';
            texts.push(Array.isArray(t) ? t.join('') : t);
        }
    }
    return texts.join('\\n');
}"""


def _answer(page, marker: str, body: str, last: str, *expect: str) -> str:
    """Put ``body`` in place of the exercise's stub (or its previous answer), run the cell and
    return the cell's output once it shows every text of ``expect`` (the check's line comes
    before the lines the cell prints after it, so name a later one to wait for those too)."""
    index = page.evaluate(SET_ANSWER, {"marker": marker, "body": body, "last": last})
    assert index >= 0, f"no exercise cell with {marker!r}"
    deadline = time.monotonic() + 60
    while not all(e in (text := page.evaluate(OUTPUT_TEXT, index)) for e in expect):
        assert time.monotonic() < deadline, f"no {expect!r} in the cell's output: {text[-500:]}"
        page.wait_for_timeout(300)
    return text


RUN_NEXT = """(marker) => {
    const nb = window.jupyterapp.shell.currentWidget.content;
    const i = nb.widgets.findIndex(c => c.model.sharedModel.getSource().includes(marker));
    if (i < 0) { return -1; }
    nb.activeCellIndex = i + 1;
    window.jupyterapp.commands.execute('notebook:run-cell');
    return i + 1;
}"""


def _run_next_cell(page, marker: str, *expect: str) -> str:
    """Run the cell after the one holding ``marker`` (as a student goes on) and return its
    output once it shows every text of ``expect``."""
    index = page.evaluate(RUN_NEXT, marker)
    assert index >= 1, f"no cell with {marker!r}"
    deadline = time.monotonic() + 60
    while not all(e in (text := page.evaluate(OUTPUT_TEXT, index)) for e in expect):
        assert time.monotonic() < deadline, f"no {expect!r} in the cell's output: {text[-500:]}"
        page.wait_for_timeout(300)
    return text


def _wait_for_text(page, expect: str, index: int = -1, timeout: float = 60) -> str:
    """The outputs' text (of cell ``index``, or all) once it holds ``expect``; bounded, since a
    loaded machine delivers a cell's last output later than an idle one."""
    deadline = time.monotonic() + timeout
    while expect not in (text := page.evaluate(OUTPUT_TEXT, index)):
        assert time.monotonic() < deadline, f"no {expect!r} in the outputs: {text[-500:]}"
        page.wait_for_timeout(300)
    return text


def _printed_your_lines(page) -> list[str]:
    """Lines the notebook's code printed that say "your" (the check's "your turn" aside)."""
    lines = page.evaluate(OUTPUT_TEXT, -1).splitlines()
    return [ln for ln in lines if re.search(r"\byours?\b", ln, re.I) and "your turn" not in ln]


def _deadline_slider_redraws_the_plan(page) -> None:
    """Notebook 06: moving the deadline redraws the pipeline timeline under the slider."""
    slider = page.locator(".widget-slider", has_text="deadline_s").first
    slider.wait_for(state="visible", timeout=30_000)
    box = page.locator(".widget-vbox", has=slider).last
    readout = slider.locator(".widget-readout")
    before_value, before_plot = readout.inner_text(), _image_of(box)
    _set_slider(page, slider, 0)  # below the range: the fastest plan's iteration time
    deadline = time.monotonic() + 30
    while _image_of(box) == before_plot:
        assert time.monotonic() < deadline, "the timeline did not change with the deadline"
        page.wait_for_timeout(300)
    assert readout.inner_text() != before_value  # the slider shows the deadline used
    slider.scroll_into_view_if_needed()


@pytest.mark.parametrize("lab", ["06"], indirect=True)
def test_deadline_slider_and_exercise_answers_in_the_browser(lab, chromium):
    """Notebook 06 (student edition), one run in JupyterLab (its three training launches are
    the costliest run of the browser tests): moving the deadline redraws the plan in place;
    unsolved, its lines name the reference; a constant, a missing return and a known mistake
    each get their own hint; a right answer is called yours."""

    def check(page) -> None:
        assert _printed_your_lines(page) == []
        assert "the reference iteration_energy gives" in page.evaluate(OUTPUT_TEXT, -1)
        _deadline_slider_redraws_the_plan(page)
        assert _printed_your_lines(page) == []  # the redraw printed nothing of the student's
        marker, last = "def iteration_energy(", "return "
        then = "the planner's timeline"  # printed after the check's line
        out = _answer(page, marker, "return 1000.0", last, "whatever the input", then)
        assert "same answer whatever the input" in out and "the reference iteration_energy" in out
        out = _answer(page, marker, "x = sum(busy_energy)", "return 1000.0", "returned None", then)
        assert "end it with a `return`" in out
        out = _answer(page, marker, "return sum(busy_energy)", "x = sum(", "blocking power", then)
        assert re.search(r"\d of 3 cases right", out)
        right = (
            "return sum(e + p * (iteration_time - t)\n"
            "           for e, t, p in zip(busy_energy, busy_time, blocking_power))"
        )
        out = _answer(page, marker, right, "return sum(busy_energy)", "all 3 cases right", then)
        assert "your iteration_energy gives" in out and "the reference" not in out
        # plan_within: a wrong index is told what differs, and the line under the check says the
        # plan it names is the reference's
        out = _answer(page, "def plan_within(", "return len(plans) - 1", "return ", "Hint")
        from zeus_nb.course import check as checks

        hints = [m.hint for m in checks.MISTAKES["plan_within"]()]
        assert "your answer" in out and not [h for h in hints if h in out]  # no mistake's hint
        after = _run_next_cell(page, "def plan_within(", "picks the plan")
        assert "the reference plan_within picks" in after and "your plan_within" not in after
        # the measured live run equals its prediction: the notebook says why
        _wait_for_text(page, "the same frequency model the planner predicts with")

    _run_in_browser(lab, chromium, check)


# --- the slide decks ------------------------------------------------------------------------

DECKS = sorted((REPO / "docs" / "course" / "slides").glob("*.slides.html"))
SLIDE_STATE = """() => {
    const s = Reveal.getCurrentSlide();
    const imgs = [...s.querySelectorAll('img')].map(i => {
        const r = i.getBoundingClientRect();
        return i.complete && i.naturalWidth > 0 && r.width > 100 && r.bottom <= innerHeight;
    });
    return {height: s.scrollHeight, limit: Reveal.getConfig().height, imgs: imgs};
}"""


def test_slide_decks_work_offline_show_plots_and_fit_every_slide(chromium):
    """The committed decks open from disk: nothing leaves file:, each slide fits the deck's height,
    and a slide shows a plot (screenshot kept)."""
    assert len(DECKS) == 6
    ARTIFACTS.mkdir(exist_ok=True)
    shot = ARTIFACTS / "slides-plot.png"
    with _page(chromium, 1280, 800) as page:
        outside: list[str] = []

        def offline(route):
            url = route.request.url
            local = url.startswith(("file:", "data:")) or "//127.0.0.1" in url
            if not local:
                outside.append(url)
                return route.abort()
            return route.continue_()

        page.route("**/*", offline)
        plots = 0
        for deck in DECKS:
            page.goto(deck.as_uri())
            page.wait_for_function("window.Reveal && Reveal.isReady()", timeout=30_000)
            page.evaluate("Reveal.configure({transition: 'none'})")
            notes = []
            for n in range(page.evaluate("Reveal.getTotalSlides()")):
                state = page.evaluate(SLIDE_STATE)
                notes.append(page.evaluate("Reveal.getSlideNotes() || ''"))
                where = f"{deck.name}, slide {n}"
                assert state["height"] <= state["limit"], f"{where} does not fit: {state}"
                if state["imgs"]:
                    assert all(state["imgs"]), f"{where}: a plot did not load or is cut"
                    if plots == 0:
                        page.screenshot(path=str(shot))
                    plots += 1
                page.evaluate("Reveal.next()")
            # speaker notes for the teacher (`s` shows them): the first slide's says how
            # long the notebook runs, and every exercise slide's what its check tries
            assert "Run All takes about" in notes[0], deck.name
            stubs = page.evaluate(
                "[...document.querySelectorAll('section')].filter(s => "
                "s.textContent.includes('your turn')).length"
            )
            tried = sum("tries" in n and "Known mistakes" in n for n in notes)
            assert stubs >= 1 and tried >= 2, (deck.name, stubs, tried)
    assert not outside, f"a deck fetched from the network: {outside[:5]}"
    assert plots >= len(DECKS) and shot.stat().st_size > 20_000
