"""atomic_write: the file appears whole, or not at all, and nothing else is left behind."""

import os
import stat

import pytest

from mpigraph.util.atomic import atomic_write


def test_the_file_appears_when_the_block_ends(tmp_path):
    with atomic_write(tmp_path / "a.txt") as f:
        f.write("half")
        assert not (tmp_path / "a.txt").exists()
        f.write(" and whole")
    assert (tmp_path / "a.txt").read_text() == "half and whole"
    assert stat.S_IMODE(os.stat(tmp_path / "a.txt").st_mode) == 0o644
    assert os.listdir(tmp_path) == ["a.txt"]


def test_a_failed_block_leaves_nothing_and_keeps_the_old_file(tmp_path):
    (tmp_path / "a.txt").write_text("old")
    with pytest.raises(OSError, match="disk full"):
        with atomic_write(tmp_path / "a.txt") as f:
            f.write("new")
            raise OSError("disk full")
    assert (tmp_path / "a.txt").read_text() == "old"
    assert os.listdir(tmp_path) == ["a.txt"]


def test_a_planted_link_is_replaced_not_followed(tmp_path):
    (tmp_path / "victim").write_text("keep")
    os.symlink(tmp_path / "victim", tmp_path / "a.txt")
    os.symlink(tmp_path / "victim", tmp_path / "a.txt.tmp")     # the old fixed temporary name
    with atomic_write(tmp_path / "a.txt") as f:
        f.write("report")
    assert (tmp_path / "victim").read_text() == "keep"
    assert not os.path.islink(tmp_path / "a.txt") and (tmp_path / "a.txt").read_text() == "report"
