"""The test files that take longest run first, so that the xdist workers finish together.

pytest-xdist (``--dist loadfile --no-loadscope-reorder``, pyproject.toml) hands out whole files in
collection order. Alphabetically the docs site build (``test_site.py``, which executes every
notebook) came last and ran alone at the end while the other workers sat idle; moved to the front,
the long files start at once and the many short files fill in around them. The order of the
tests within a file is kept.
"""

from __future__ import annotations

import pytest
from tour_fixture import FIXTURE_RUNS

# Longest first, by `--durations` of a whole-suite run: every runnable block of the docs (the
# longest file, 7 min of one worker on 2026-12-05), the docs site build, the notebook tour, the
# tours on fake NVML GPUs, Zeus's own unit tests, JupyterLab in Chromium, both course editions.
# Then every other file of 20 s or more, longest first (a per-test timeline of `.ci/run` on
# 2026-12-06): left in alphabetical order, Zeus's seed tests (73 s) ran last, alone on one worker
# for over a minute while the other two had finished.
FIRST = (
    "test_docs_facts.py",
    "test_site.py",
    "test_notebooks.py",
    "test_tour_nvml.py",
    "test_zeus_suite.py",
    "test_browser.py",
    "test_course.py",
    "test_forkrun.py",
    "test_zeus_seeds.py",
    "test_pipeline_train_torchrun.py",
    "test_warm_kernels.py",
    "test_sim_wall.py",
    "test_reliability_inputs.py",
    "test_reliability_sweep.py",
    "test_cluster.py",
    "test_readonly_gpu.py",
    "test_cluster_notebook_sweep.py",
    "test_execute.py",
    "test_zeus_examples.py",
    "test_reliability_interrupts.py",
    "test_notebook_sweep.py",
    "test_train.py",
    "test_bso_server_boundary.py",
    "test_docker.py",
    "test_bso_zeus_client.py",
    "test_rapl.py",
)


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    # A test that reads a session run (six notebooks executed) is slow, marked before `-m`
    # selects: the fast tier (-m "not slow and not browser") never starts a run.
    for item in items:
        if any(name in FIXTURE_RUNS for name in item.fixturenames):
            item.add_marker(pytest.mark.slow)

    def rank(item: pytest.Item) -> int:
        name = item.path.name
        return FIRST.index(name) if name in FIRST else len(FIRST)

    items.sort(key=rank)  # stable: everything else keeps its order
