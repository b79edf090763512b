"""The site's figures carry alt text: the notebook template writes none for a bare image."""

from __future__ import annotations

import base64
import io
import logging

import nbformat
from nbconvert import HTMLExporter

from zeus_nb.docsite import describe_figures


def _png() -> str:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(1, 1))
    ax.plot([0, 1], [1, 0])
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    plt.close(fig)
    return base64.b64encode(buf.getvalue()).decode()


def _notebook() -> nbformat.NotebookNode:
    figure = nbformat.v4.new_output(
        "display_data", data={"image/png": _png(), "text/plain": "<Figure size 100x100>"}
    )
    code = nbformat.v4.new_code_cell("plot()")
    code.outputs = [figure]
    second = nbformat.v4.new_code_cell("plot()")
    second.outputs = [nbformat.from_dict(dict(figure))]
    return nbformat.v4.new_notebook(
        cells=[
            nbformat.v4.new_markdown_cell("# Measuring energy\n\nText."),
            nbformat.v4.new_markdown_cell("## The power timeline"),
            code,
            second,
        ]
    )


def _missing_alt_warnings(nb, caplog) -> list[str]:
    exporter = HTMLExporter(template_name="lab")  # the template mkdocs-jupyter builds on
    with caplog.at_level(logging.WARNING):
        html, _ = exporter.from_notebook_node(nb)
    return html, [r.getMessage() for r in caplog.records if "Alternative text" in r.getMessage()]


def test_a_bare_figure_has_no_alt_text_and_nbconvert_says_so(caplog):
    """The check below can fail: without describe_figures the template warns."""
    _, warnings = _missing_alt_warnings(_notebook(), caplog)
    assert warnings


def test_every_figure_gets_alt_text_from_its_section(caplog):
    nb = _notebook()
    assert describe_figures(nb, "01_measuring_energy") == 2
    html, warnings = _missing_alt_warnings(nb, caplog)
    assert not warnings
    from bs4 import BeautifulSoup

    alts = [img.get("alt") for img in BeautifulSoup(html, "html.parser").find_all("img")]
    assert alts == [
        'Figure 1 under "The power timeline" in notebook 01_measuring_energy',
        'Figure 2 under "The power timeline" in notebook 01_measuring_energy',
    ]
    assert describe_figures(nb, "01_measuring_energy") == 0  # described once
