"""The shim never writes through planted links or into shared directories, and leaves the program as it is.

Security: raw/ is created user-only (0700), logs 0600 with O_EXCL | O_NOFOLLOW;
a raw/ that is a symlink, or writable by others, is refused (the program runs
on unprofiled, one message).  Transparency: output and exit status are the
same with and without the shim (the summary is the shim's only addition and
MPIGRAPH_QUIET=1 removes it).
"""

import os
import stat

import pytest

import mpi_env

HERE = os.path.dirname(os.path.abspath(__file__))
NPROCS = 2


@pytest.fixture(scope="module")
def program(tmp_path_factory):
    mpi = mpi_env.wheel_mpi()
    builder = mpi_env.Builder(str(tmp_path_factory.mktemp("build")))
    return mpi, builder.build(os.path.join(HERE, "shim_programs", "exit_code.c"), mpi.mpicc)


def run(program, out=None, **rank_env):
    mpi, exe = program
    return mpi_env.mpirun(mpi, NPROCS, [exe], out=out, rank_env=rank_env)


def shim_messages(result):
    return [line for line in result.stderr.splitlines() if line.startswith("mpigraph:")]


def test_output_and_exit_status_are_unchanged(program, tmp_path):
    plain = run(program)
    shimmed = run(program, tmp_path / "run", MPIGRAPH_QUIET="1")
    assert plain.returncode == shimmed.returncode == 3
    assert sorted(shimmed.stdout.splitlines()) == sorted(plain.stdout.splitlines()) == [
        "rank %d sum 1" % r for r in range(NPROCS)]
    assert sorted(shimmed.stderr.splitlines()) == sorted(plain.stderr.splitlines())
    assert (tmp_path / "run" / "summary.txt").exists()


def test_raw_directory_and_logs_are_private(program, tmp_path):
    out = tmp_path / "run"
    run(program, out, MPIGRAPH_ANALYZE="off")
    assert stat.S_IMODE(os.stat(out / "raw").st_mode) == 0o700
    for name in os.listdir(out / "raw"):
        assert stat.S_IMODE(os.lstat(out / "raw" / name).st_mode) == 0o600


def test_planted_symlink_log_is_not_followed(program, tmp_path):
    victim = tmp_path / "victim"
    victim.write_text("precious")
    out = tmp_path / "run"
    (out / "raw").mkdir(parents=True, mode=0o700)
    os.symlink(victim, out / "raw" / "rank-1.log")
    result = run(program, out)
    assert result.returncode == 3 and len(result.stdout.splitlines()) == NPROCS
    assert shim_messages(result) == ["mpigraph: rank 0: %s already holds the logs of another run (choose another "
                                     "MPIGRAPH_OUT); the program runs on without profiling" % (out / "raw")]
    assert victim.read_text() == "precious"
    assert os.listdir(out / "raw") == ["rank-1.log"]


def test_raw_directory_symlink_is_refused(program, tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir(mode=0o700)
    out = tmp_path / "run"
    out.mkdir()
    os.symlink(elsewhere, out / "raw")
    result = run(program, out)
    assert result.returncode == 3
    assert shim_messages(result) == ["mpigraph: rank 0: %s is a symbolic link: refusing to write logs through it; "
                                     "the program runs on without profiling" % (out / "raw")]
    assert os.listdir(elsewhere) == []


def test_shared_raw_directory_is_refused(program, tmp_path):
    out = tmp_path / "run"
    (out / "raw").mkdir(parents=True)
    os.chmod(out / "raw", 0o777)
    result = run(program, out)
    assert result.returncode == 3
    assert shim_messages(result) == ["mpigraph: rank 0: %s is writable by other users (mode 777): use a private "
                                     "directory; the program runs on without profiling" % (out / "raw")]
    assert os.listdir(out / "raw") == []
