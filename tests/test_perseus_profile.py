"""Instruction profile CSV validation: errors name the file, line and column."""

import pytest

from zeus_nb.optimizer.pipeline_frequency import ProfileFormatError, load_profile

GOOD = """# zeus-nb instruction profile v1
stage,instruction,frequency,time,energy
0,forward,1500,0.010,2.0
0,forward,1200,0.012,1.8
0,backward,1500,0.020,4.0
0,blocking,,2.0,100.0
1,forward,1500,0.011,2.1
1,backward,1500,0.021,4.1
1,backward,1200,0.025,3.9
1,blocking,210,1.0,40.0
1,blocking,210,1.0,60.0
"""


def _write(tmp_path, text):
    p = tmp_path / "prof.csv"
    p.write_text(text)
    return p


def test_good_profile(tmp_path):
    prof = load_profile(_write(tmp_path, GOOD))
    assert prof.num_stages == 2
    assert prof.blocking_power == {0: 50.0, 1: 50.0}
    assert [m.frequency for m in prof.options(0, "forward")] == [1500, 1200]
    assert prof.fastest(1, "backward").time == 0.021


@pytest.mark.parametrize(
    ("old", "new", "match"),
    [
        ("0,forward,1200,0.012,1.8", "0,forward,1200,abc,1.8", r"line 4, column time: 'abc'"),
        ("0,forward,1200,0.012,1.8", "0,forward,1200,0.012,-1", r"line 4, column energy: '-1'"),
        ("0,forward,1200,0.012,1.8", "0,forward,12.5,0.012,1.8", r"column frequency: '12.5'"),
        ("0,forward,1200,0.012,1.8", "x,forward,1200,0.012,1.8", r"column stage: 'x'"),
        ("0,forward,1200,0.012,1.8", "0,fwd,1200,0.012,1.8", r"column instruction: 'fwd'"),
        ("0,forward,1200,0.012,1.8", "0,forward,1500,0.012,1.8", r"line 4: .*repeats line 3"),
        ("0,forward,1200,0.012,1.8", "0,forward,1200,0.012", r"line 4: 4 fields, expected 5"),
        ("0,blocking,,2.0,100.0\n", "", r"stage 0 has no 'blocking' row"),
        ("0,backward,1500,0.020,4.0\n", "", r"stage 0 has no 'backward' row"),
        ("stage,instruction,frequency,time,energy", "stage,inst,frequency,time,energy", "header"),
    ],
)
def test_bad_profiles_name_line_and_column(tmp_path, old, new, match):
    assert old in GOOD
    with pytest.raises(ProfileFormatError, match=match) as info:
        load_profile(_write(tmp_path, GOOD.replace(old, new)))
    assert "prof.csv" in str(info.value)


def test_stage_gap(tmp_path):
    text = GOOD.replace("\n1,", "\n2,")
    with pytest.raises(ProfileFormatError, match=r"missing stage\(s\) \[1\]"):
        load_profile(_write(tmp_path, text))


def test_missing_and_empty_files(tmp_path):
    with pytest.raises(FileNotFoundError):
        load_profile(tmp_path / "nope.csv")
    with pytest.raises(ProfileFormatError, match="no header"):
        load_profile(_write(tmp_path, "# only a comment\n"))
