"""Neighbours of causes closed earlier, each found by discovery rather than by one example.

Every shipped notebook's list parameter, every name the traces match, every option with a
domain, every monitor CLI: each test enumerates its cases, so a new one is covered as it lands.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from zeus_nb.commands.sweep import build_grid
from zeus_nb.runner.notebooks import grid_points, list_parameter, notebook_parameters

REPO = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((REPO / "notebooks").glob("[0-9]*.ipynb"))


def _list_parameters() -> list[tuple[Path, str, dict]]:
    found = []
    for nb in NOTEBOOKS:
        for name, info in notebook_parameters(nb).items():
            if list_parameter(info):
                found.append((nb, name, info))
    return found


def test_the_notebooks_have_list_parameters():
    names = {name for _, name, _ in _list_parameters()}
    assert {"live_batch_sizes", "live_power_limits"} <= names  # the discovery finds them


@pytest.mark.parametrize(
    ("notebook", "name", "info"),
    _list_parameters(),
    ids=[f"{nb.stem}:{name}" for nb, name, _ in _list_parameters()],
)
def test_a_list_parameter_swept_with_commas_is_one_point(notebook, name, info):
    default = ast.literal_eval(info["default"])
    text = default if isinstance(default, str) else ",".join(map(str, default))
    if "," not in text:
        text = "32,128"  # a value with a comma, so a split would show
    points = grid_points(build_grid(notebook, [[name, text]]))
    assert len(points) == 1, points
    value = points[0][name]
    assert value == text if isinstance(default, str) else list(value) == list(default)
    # brackets still give one point per list
    assert len(grid_points(build_grid(notebook, [[name, "[32,128],[512]"]]))) == 2
