"""report.sections: the sections `mpigraph model` and `mpigraph decompose` add to summary.txt."""

import os

from mpigraph.report import sections

ANALYSIS = "mpigraph 0.1.0 report\n\nDiagnosis:\n  rank 2 is late (see Queuing-network model below)\n"
MODEL = "Queuing-network model\nP=4: measured 1.0 s\n"
DECOMPOSE = "MPI time decomposition\nMPI 40.0% of the ranks' program time\n"


def summary_of(tmp_path, text=ANALYSIS):
    (tmp_path / "summary.txt").write_text(text)
    return tmp_path / "summary.txt"


def test_a_section_goes_last_after_a_blank_line(tmp_path):
    path = summary_of(tmp_path)
    assert sections.add_section(str(tmp_path), "Queuing-network model", MODEL) == [str(path)]
    assert path.read_text() == ANALYSIS + "\n" + MODEL


def test_a_section_replaces_its_own_and_keeps_the_others(tmp_path):
    path = summary_of(tmp_path)
    sections.add_section(str(tmp_path), "Queuing-network model", MODEL)
    sections.add_section(str(tmp_path), "MPI time decomposition", DECOMPOSE)
    again = MODEL.replace("1.0 s", "2.0 s")
    sections.add_section(str(tmp_path), "Queuing-network model", again)
    # The analysis's text (whose diagnosis names the model mid-line: not a section), the
    # decomposition, then the model's new section; its old one is gone.
    assert path.read_text() == ANALYSIS + "\n" + DECOMPOSE + "\n" + again


def test_no_summary_no_section(tmp_path):
    assert sections.add_section(str(tmp_path), "Queuing-network model", MODEL) == []
    assert not os.path.exists(tmp_path / "summary.txt")
