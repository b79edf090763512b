"""The repository keeps the promises its README makes."""

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def quick_start_commands() -> list[str]:
    text = (REPO / "README.md").read_text()
    section = text.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    return [b.strip() for b in re.findall(r"```bash\n(.*?)```", section, re.S)]


def test_readme_has_exactly_two_commands_and_ci_runs_the_test_one():
    commands = quick_start_commands()
    assert len(commands) == 2 and all("\n" not in c for c in commands)
    ci = (REPO / ".ci" / "run").read_text().splitlines()
    assert commands[1] in ci, "the .ci/run script must run the README's test command verbatim"


def test_ci_times_the_readmes_fast_tier_before_the_whole_suite():
    """The fast tier's time in the README comes from .ci/run's own timing of the same command."""
    text = (REPO / "README.md").read_text()
    section = text.split("## Development", 1)[1].split("\n## ", 1)[0]
    fast = [b.strip() for b in re.findall(r"```bash\n(.*?)```", section, re.S) if "pytest" in b]
    assert len(fast) == 1 and '-m "not slow and not browser"' in fast[0]
    ci = (REPO / ".ci" / "run").read_text().splitlines()
    assert ci.index(fast[0]) < ci.index(quick_start_commands()[1])
    assert 'echo "ci: the fast tier took' in ci[ci.index(fast[0]) + 1]


def test_top_level_layout():
    for name in (
        "pyproject.toml",
        "README.md",
        "zeus_nb",
        "notebooks",
        "data_scripts",
        "tests",
        "benchmarks",
        ".ci/run",
    ):
        assert (REPO / name).exists(), name


def test_shipped_data_keeps_license_and_credit():
    res = REPO / "zeus_nb" / "resources"
    assert "Apache License" in (res / "LICENSE-zeus-apache-2.0").read_text()
    assert "Zeus" in (res / "README.md").read_text()
    assert sorted(p.name for p in (res / "zeus_traces").glob("*.csv")) == [
        "summary_power_a40.csv",
        "summary_power_v100.csv",
        "summary_train.csv",
    ]


def test_quick_start_installs_only_the_tour_and_the_test_command_its_tools():
    setup, tests = quick_start_commands()
    assert "zeus-nb tour" in setup and "pip install -e ." in setup and "[dev" not in setup
    assert "pip install -e '.[dev" in tests and tests.endswith("-m pytest")
    readme = (REPO / "README.md").read_text()
    section = readme.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    for prerequisite in ("chromium", "postgresql-15", "prometheus-pushgateway"):
        assert prerequisite in section, prerequisite
        assert prerequisite in (REPO / ".ci" / "run").read_text()
    assert "pip install zeus-nb" not in readme, "zeus-nb is not on PyPI: install from a checkout"


def test_the_longest_first_order_names_test_files_that_exist():
    """A renamed test file would drop out of the order silently and run last again."""
    from slow_first import FIRST

    assert len(set(FIRST)) == len(FIRST)
    missing = [name for name in FIRST if not (REPO / "tests" / name).is_file()]
    assert not missing, f"tests/slow_first.py names files that are gone: {missing}"
