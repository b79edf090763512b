"""zeus-nb perseus plan / synthetic."""

import json

import pytest

from zeus_nb.cli import main


@pytest.fixture(scope="module")
def profile_csv(tmp_path_factory):
    path = tmp_path_factory.mktemp("perseus") / "prof.csv"
    assert main(["perseus", "synthetic", str(path), "--gpu", "v100", "--stages", "2",
                 "--weights", "1,1.5"]) == 0  # fmt: skip
    return path


def test_plan_json_is_the_frontier(profile_csv, capsys):
    capsys.readouterr()
    assert main(["perseus", "plan", str(profile_csv), "--stages", "2", "--microbatches", "3",
                 "--json"]) == 0  # fmt: skip
    points = json.loads(capsys.readouterr().out)
    assert isinstance(points, list) and len(points) >= 2
    for p in points:
        assert set(p) == {"iteration_time", "energy", "plan"}
        assert len(p["plan"]) == 2 and all(len(stage) == 6 for stage in p["plan"])
        assert set(p["plan"][0][0]) == {"instruction", "microbatch", "frequency"}
    times = [p["iteration_time"] for p in points]
    energies = [p["energy"] for p in points]
    assert times == sorted(times) and len(set(times)) == len(times)
    assert all(b <= a for a, b in zip(energies, energies[1:], strict=False))


def test_plan_deadline(profile_csv, capsys):
    main(["perseus", "plan", str(profile_csv), "--stages", "2", "--microbatches", "3", "--json"])
    points = json.loads(capsys.readouterr().out)
    deadline = (points[0]["iteration_time"] + points[-1]["iteration_time"]) / 2
    assert main(["perseus", "plan", str(profile_csv), "--stages", "2", "--microbatches", "3",
                 "--deadline", str(deadline), "--json"]) == 0  # fmt: skip
    chosen = json.loads(capsys.readouterr().out)
    fits = [p for p in points if p["iteration_time"] <= deadline]
    assert chosen["energy"] == min(p["energy"] for p in fits)
    assert main(["perseus", "plan", str(profile_csv), "--stages", "2", "--microbatches", "3",
                 "--deadline", "1e-6"]) == 2  # fmt: skip
    assert "fastest takes" in capsys.readouterr().err


def test_plan_text_and_errors(profile_csv, tmp_path, capsys):
    assert main(["perseus", "plan", str(profile_csv), "--stages", "2", "--microbatches", "2"]) == 0
    out = capsys.readouterr().out
    assert "all max clocks" in out and "saved" in out
    assert main(["perseus", "plan", str(profile_csv), "--stages", "3", "--microbatches", "2"]) == 2
    assert "2 stage(s) but 3" in capsys.readouterr().err
    bad = tmp_path / "bad.csv"
    bad.write_text("stage,instruction,frequency,time\n")
    assert main(["perseus", "plan", str(bad), "--stages", "2", "--microbatches", "2"]) == 2
    assert "energy" in capsys.readouterr().err
