"""End to end: real MPI programs run under mpiexec with and without the shim.

Each program in tests/programs/ is built with the MPI's own compiler wrapper,
run on 4 ranks plainly and with the shim preloaded, and the run directory is
checked: files present, one functions.csv count per function equal to the
calls the program made (tests/programs/expected.py), and the program's own
output unchanged.  No mocks and no time limits.
"""

import csv
import filecmp
import os
import re
import shutil
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import mpi_env  # noqa: E402
from programs import expected  # noqa: E402

NPROCS = 4
REPORT_FILES = ["summary.txt", "ranks.csv", "ranks.parquet", "functions.csv"]


# ---- the MPIs and the builder --------------------------------------------------

@pytest.fixture(scope="module")
def debian():
    mpi = mpi_env.debian_mpich()
    if mpi is None:
        pytest.skip("Debian's MPICH is not installed (apt-get install mpich libmpich-dev)")
    return mpi


@pytest.fixture(scope="module")
def debian_fortran(debian):
    if debian.mpif90 is None:
        pytest.skip("no mpif90.mpich or no gfortran (apt-get install gfortran libmpich-dev)")
    return debian


class Run:
    """A program run twice on NPROCS ranks: plain, and under the shim into `out`."""

    def __init__(self, name, program, plain, shimmed, out):
        self.name, self.program, self.plain, self.shimmed, self.out = name, program, plain, shimmed, out

    def describe(self, result):
        return "%s: exit %d\n--- stdout\n%s--- stderr\n%s" % (self.name, result.returncode, result.stdout,
                                                              result.stderr[-4000:])


def run_both(tmp_path_factory, name, program, mpi, argv):
    out = tmp_path_factory.mktemp(name) / "run"
    plain = mpi_env.mpirun(mpi, NPROCS, argv)
    assert plain.returncode == 0, "the program fails even without the shim:\n" + plain.stderr
    shimmed = mpi_env.mpirun(mpi, NPROCS, argv, out=out)
    return Run(name, program, plain, shimmed, out)


@pytest.fixture(scope="module")
def c_wheel(tmp_path_factory, builder, wheel):
    """calls.c built with the wheel's mpicc, run with its mpiexec."""
    exe = builder.build("calls.c", wheel.mpicc)
    return run_both(tmp_path_factory, "c_wheel", "calls.c", wheel, [exe])


@pytest.fixture(scope="module")
def c_debian(tmp_path_factory, builder, debian):
    """calls.c built with Debian's mpicc.mpich, run with mpiexec.mpich."""
    exe = builder.build("calls.c", debian.mpicc)
    return run_both(tmp_path_factory, "c_debian", "calls.c", debian, [exe])


@pytest.fixture(scope="module")
def f90_debian(tmp_path_factory, builder, debian_fortran):
    """calls.f90 (use mpi) built with mpif90.mpich, run with mpiexec.mpich."""
    exe = builder.build("calls.f90", debian_fortran.mpif90)
    return run_both(tmp_path_factory, "f90_debian", "calls.f90", debian_fortran, [exe])


@pytest.fixture(scope="module")
def f08_debian(tmp_path_factory, builder, debian_fortran):
    """calls_f08.f90 (use mpi_f08) built with mpif90.mpich, run with mpiexec.mpich."""
    exe = builder.build("calls_f08.f90", debian_fortran.mpif90)
    return run_both(tmp_path_factory, "f08_debian", "calls_f08.f90", debian_fortran, [exe])


@pytest.fixture(scope="module")
def py_wheel(tmp_path_factory, wheel):
    """calls_py.py (mpi4py) run by this Python under the wheel's mpiexec."""
    script = os.path.join(mpi_env.PROGRAMS, "calls_py.py")
    return run_both(tmp_path_factory, "py_wheel", "calls_py.py", wheel, [sys.executable, script])


COMPILED_RUNS = ["c_wheel", "c_debian", "f90_debian", "f08_debian"]
ALL_RUNS = COMPILED_RUNS + ["py_wheel"]


@pytest.fixture
def run(request):
    return request.getfixturevalue(request.param)


def fold_large_count(counts):
    """MPI_Send_c and MPI_Send counted together (mpi4py 4 calls the large-count variants)."""
    folded = {}
    for name, n in counts.items():
        base = name[:-2] if name.endswith("_c") else name
        folded[base] = folded.get(base, 0) + n
    return folded


# ---- the checks ----------------------------------------------------------------

@pytest.mark.parametrize("run", ALL_RUNS, indirect=True)
def test_program_succeeds_under_the_shim(run):
    assert run.shimmed.returncode == 0, run.describe(run.shimmed)


@pytest.mark.parametrize("run", ALL_RUNS, indirect=True)
def test_run_directory_holds_the_report_and_raw_logs(run):
    missing = [f for f in REPORT_FILES + ["raw/rank-%d.log" % r for r in range(NPROCS)]
               if not (run.out / f).is_file()]
    assert not missing, "missing in %s: %s\n%s" % (run.out, missing, run.describe(run.shimmed))


@pytest.mark.parametrize("run", ALL_RUNS, indirect=True)
def test_program_output_is_unchanged(run):
    """stdout is the program's own output plus, once, the summary rank 0 prints at MPI_Finalize."""
    summary = (run.out / "summary.txt").read_text() if (run.out / "summary.txt").is_file() else ""
    text = run.shimmed.stdout
    if summary:
        assert text.count(summary) == 1, "the summary is not printed exactly once\n" + run.describe(run.shimmed)
        text = text.replace(summary, "", 1)
    assert text == run.plain.stdout, run.describe(run.shimmed)


@pytest.mark.parametrize("run", ["c_wheel", "c_debian", "py_wheel"], indirect=True)
def test_program_output_comes_before_the_summary(run):
    """The program's buffered stdout is not overtaken by the summary printed at MPI_Finalize."""
    summary = (run.out / "summary.txt").read_text()
    assert run.shimmed.stdout == run.plain.stdout + summary, run.describe(run.shimmed)


def check_counts(run, strict):
    """functions.csv's counts equal the program's calls; `strict`: and nothing else is reported."""
    got = fold_large_count(mpi_env.read_functions_csv(run.out / "functions.csv"))
    want = expected.totals(run.program, NPROCS)
    want.update(expected.self_reported(run.shimmed.stderr, os.path.basename(run.program)))
    for name in expected.SELF_REPORTED.get(run.program, ()):
        assert name in want, "%s did not report its %s calls on stderr" % (run.program, name)
    wrong = {name: (got.get(name, 0), n) for name, n in sorted(want.items())
             if got.get(name, 0) != n and not (name in expected.LOCAL and name not in got)}
    assert not wrong, "%s: {function: (functions.csv, program)}: %s" % (run.name, wrong)
    if strict:
        extra = {name: n for name, n in got.items() if name not in want}
        assert not extra, "%s: functions.csv reports calls the program never made: %s" % (run.name, extra)
    return got


@pytest.mark.parametrize("run", COMPILED_RUNS, indirect=True)
def test_function_counts_equal_the_calls_made(run):
    check_counts(run, strict=True)


def test_mpi4py_program_is_recorded(py_wheel):
    """Only the script's own calls are known: mpi4py makes more of its own."""
    check_counts(py_wheel, strict=False)


@pytest.mark.parametrize("run", ALL_RUNS, indirect=True)
def test_ranks_table_agrees_with_the_functions_table(run):
    with open(run.out / "ranks.csv", newline="") as f:
        ranks = list(csv.DictReader(f))
    assert [int(r["rank"]) for r in ranks] == list(range(NPROCS))
    functions = mpi_env.read_functions_csv(run.out / "functions.csv")
    assert sum(int(r["calls"]) for r in ranks) == sum(functions.values())
    import pyarrow.parquet as pq

    table = pq.read_table(run.out / "ranks.parquet").to_pydict()
    assert table["rank"] == list(range(NPROCS))
    assert table["calls"] == [int(r["calls"]) for r in ranks]


# ---- offline analysis ----------------------------------------------------------

@pytest.fixture(scope="module")
def reanalysed(c_wheel, wheel, tmp_path_factory):
    """c_wheel's run analysed again offline: serially, and on 2 analysis ranks."""
    assert (c_wheel.out / "raw").is_dir(), c_wheel.describe(c_wheel.shimmed)
    dirs = {}
    for how, nprocs in (("serial", None), ("mpiexec-2", 2)):
        d = tmp_path_factory.mktemp("analyze") / how
        shutil.copytree(c_wheel.out / "raw", d / "raw")
        result = mpi_env.mpigraph(["analyze", d], nprocs=nprocs, mpi=wheel)
        assert result.returncode == 0, "mpigraph analyze (%s) failed:\n%s%s" % (how, result.stdout, result.stderr)
        dirs[how] = d
    return dirs


@pytest.mark.parametrize("table", ["functions.csv", "ranks.csv"])
def test_offline_analysis_serial_and_parallel_agree(reanalysed, table):
    serial, parallel = reanalysed["serial"] / table, reanalysed["mpiexec-2"] / table
    assert filecmp.cmp(serial, parallel, shallow=False), \
        "%s differs:\n--- serial\n%s--- mpiexec -n 2\n%s" % (table, serial.read_text(), parallel.read_text())


@pytest.mark.parametrize("table", ["functions.csv", "ranks.csv"])
def test_offline_analysis_agrees_with_the_analysis_in_the_job(reanalysed, c_wheel, table):
    offline, in_job = reanalysed["serial"] / table, c_wheel.out / table
    assert filecmp.cmp(offline, in_job, shallow=False), \
        "%s differs:\n--- offline\n%s--- in the job\n%s" % (table, offline.read_text(), in_job.read_text())


def test_report_prints_the_summary_again(c_wheel):
    result = mpi_env.mpigraph(["report", c_wheel.out])
    assert result.returncode == 0, result.stderr
    assert result.stdout == (c_wheel.out / "summary.txt").read_text()


# ---- the demo ------------------------------------------------------------------

def rank_rows(text):
    """Rank numbers of the per-rank table: rows after a header line starting with 'rank'."""
    ranks, in_table = [], False
    for line in text.splitlines():
        words = line.split()
        if words[:1] == ["rank"]:
            in_table, ranks = True, []
        elif in_table and words and words[0].isdigit():
            ranks.append(int(words[0]))
        elif in_table and ranks:
            break
    return ranks


def test_demo_prints_a_table_of_4_ranks(tmp_path):
    out = tmp_path / "demo"
    result = mpi_env.mpigraph(["demo", "--out", out], cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert re.search(r"^demo: 4 ranks, 20 iterations, checksum 8520$", result.stdout, re.M), result.stdout
    assert rank_rows(result.stdout) == [0, 1, 2, 3], result.stdout
    for f in REPORT_FILES:
        assert (out / f).is_file(), f
    assert sorted(os.listdir(out / "raw")) == mpi_env.raw_files(4)
