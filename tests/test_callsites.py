"""Call sites (issue 32): the shim's return addresses named as function, file and line.

Known answers come from the test programs' sources: the line of each call is found by its
"site:" comment, the counts are the programs' loop counts times the ranks.
"""

import csv
import os
import re
import subprocess
import sys

import numpy as np
import pyarrow.parquet as pq
import pytest

import mpi_env

RANKS = 2


def _line_of(source, marker):
    """The line number (from 1) of the line with `marker` in tests/programs/<source>."""
    with open(os.path.join(mpi_env.PROGRAMS, source)) as f:
        lines = [i + 1 for i, text in enumerate(f) if marker in text]
    assert len(lines) == 1, (source, marker, lines)
    return lines[0]


def _define(source, name):
    """The value of `#define name N` (C) or `name = N` (Fortran, Python) in the source."""
    with open(os.path.join(mpi_env.PROGRAMS, source)) as f:
        text = f.read()
    return int(re.search(r"(?:#define\s+%s\s+|\b%s\s*=\s*)(\d+)" % (name, name), text).group(1))


def _callsites(out):
    with open(os.path.join(out, "callsites.csv"), newline="") as f:
        return list(csv.DictReader(f))


def _build_c(tmp_path, flags):
    mpi = mpi_env.wheel_mpi()
    if mpi is None:
        pytest.fail("no mpicc/mpiexec: install with pip install '.[mpich,test]'")
    exe = str(tmp_path / ("callsites" + "".join(flags).replace("-", "_")))
    sources = [os.path.join(mpi_env.PROGRAMS, s) for s in ("callsites_main.c", "callsites_halo.c")]
    subprocess.run([mpi.mpicc, "-O1", *flags, "-o", exe, *sources], check=True, cwd=str(tmp_path))
    return mpi, exe


def _run(mpi, argv, out, rank_env=None):
    result = mpi_env.mpirun(mpi, RANKS, argv, out=out, rank_env=rank_env)
    assert result.returncode == 0, result.stderr
    return _callsites(out)


@pytest.fixture(scope="module")
def c_run_g(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("callsites_g")
    mpi, exe = _build_c(tmp, ["-g"])
    out = tmp / "run"
    return out, _run(mpi, [exe], out)


def test_c_program_with_g_names_both_file_line_pairs_with_exact_counts(c_run_g):
    _, rows = c_run_g
    by_function = {r["function"]: r for r in rows}
    reduce_row, sendrecv_row = by_function["MPI_Allreduce"], by_function["MPI_Sendrecv"]
    assert os.path.basename(reduce_row["file"]) == "callsites_main.c"
    assert int(reduce_row["line"]) == _line_of("callsites_main.c", "site: allreduce")
    assert int(reduce_row["count"]) == _define("callsites_main.c", "REDUCES") * RANKS
    assert os.path.basename(sendrecv_row["file"]) == "callsites_halo.c"
    assert int(sendrecv_row["line"]) == _line_of("callsites_halo.c", "site: sendrecv")
    assert int(sendrecv_row["count"]) == _define("callsites_main.c", "EXCHANGES") * RANKS
    assert reduce_row["name"] == "MPI_Allreduce at callsites_main.c:%d" % _line_of("callsites_main.c",
                                                                                 "site: allreduce")
    assert reduce_row["caller"] == "reduce_step" and sendrecv_row["caller"] == "exchange"
    assert reduce_row["stack"] == ""       # depth 1 (the default): the return address alone
    assert int(reduce_row["ranks"]) == RANKS


def test_calls_parquet_callsite_column_sums_to_the_table(c_run_g):
    """calls.parquet's callsite column: per call site, its calls add up to callsites.csv's count,
    and its bytes to the bytes."""
    out, rows = c_run_g
    calls = pq.read_table(os.path.join(out, "calls.parquet"), columns=["callsite", "calls", "bytes"]).to_pydict()
    site = np.array(calls["callsite"])
    for r in rows:
        mine = site == int(r["callsite"])
        assert int(np.array(calls["calls"])[mine].sum()) == int(r["count"])
        assert int(np.array(calls["bytes"])[mine].sum()) == int(r["bytes"])
    assert set(site.tolist()) == {int(r["callsite"]) for r in rows}


def test_api_reads_the_callsites_table(c_run_g):
    import mpigraph

    out, rows = c_run_g
    table = mpigraph.load(out).callsites
    assert sorted(table["name"]) == sorted(r["name"] for r in rows)
    assert table["count"].sum() == sum(int(r["count"]) for r in rows)


def test_summary_names_call_sites(c_run_g):
    out, _ = c_run_g
    with open(os.path.join(out, "summary.txt")) as f:
        text = f.read()
    assert "MPI_Allreduce at callsites_main.c:%d" % _line_of("callsites_main.c", "site: allreduce") in text
    assert "Call sites on the critical path" in text


def test_critical_path_names_its_call_sites(c_run_g):
    """critical_path.csv: the program's last MPI_Allreduce synchronises both ranks, so the path
    crosses it; each MPI_Allreduce segment names the one MPI_Allreduce call site, every segment with
    a site is in callsites.csv with its function, and the path section lists the call sites."""
    out, rows = c_run_g
    with open(os.path.join(out, "critical_path.csv"), newline="") as f:
        path = list(csv.DictReader(f))
    name = "MPI_Allreduce at callsites_main.c:%d" % _line_of("callsites_main.c", "site: allreduce")
    reduces = [seg for seg in path if seg["function"] == "MPI_Allreduce"]
    assert reduces and {seg["callsite_name"] for seg in reduces} == {name}
    known = {(int(r["callsite"]), r["function"]): r["name"] for r in rows}
    for seg in path:
        if seg["kind"] == "compute":
            assert seg["callsite"] == "0" and seg["callsite_name"] == ""
        elif seg["callsite"] != "0":
            assert known[(int(seg["callsite"]), seg["function"])] == seg["callsite_name"]
    with open(os.path.join(out, "summary.txt")) as f:
        text = f.read()
    line = [t for t in text.splitlines() if t.startswith("  call sites on the path: ")]
    assert len(line) == 1 and name in line[0]


def test_communicators_name_the_call_site_that_created_them(c_run_g):
    """communicators.csv: the MPI_Comm_split's communicator names its line (its rank 0's call,
    a site rank 0 of the analysis may not own); world has none."""
    out, rows = c_run_g
    with open(os.path.join(out, "communicators.csv"), newline="") as f:
        comms = {r["function"]: r for r in csv.DictReader(f)}
    split = comms["MPI_Comm_split"]
    assert split["callsite_name"] == "MPI_Comm_split at callsites_main.c:%d" % _line_of("callsites_main.c",
                                                                                      "site: split")
    assert {(int(r["callsite"]), r["name"]) for r in rows} >= {(int(split["callsite"]), split["callsite_name"])}
    assert comms["MPI_Init"]["callsite"] == "0" and comms["MPI_Init"]["callsite_name"] == ""


def test_stack_depth_two_names_the_callers_line(tmp_path):
    """MPIGRAPH_CALLSITE_DEPTH=2: a call site is the call and its caller's frame."""
    mpi, exe = _build_c(tmp_path, ["-g"])
    rows = _run(mpi, [exe], tmp_path / "run", rank_env={"MPIGRAPH_CALLSITE_DEPTH": "2"})
    by_function = {r["function"]: r for r in rows}
    assert by_function["MPI_Allreduce"]["stack"] == "callsites_main.c:%d" % _line_of("callsites_main.c",
                                                                                    "site: reduce caller")
    assert by_function["MPI_Sendrecv"]["stack"] == "callsites_main.c:%d" % _line_of("callsites_main.c",
                                                                                   "site: exchange caller")
    assert int(by_function["MPI_Sendrecv"]["line"]) == _line_of("callsites_halo.c", "site: sendrecv")
    assert int(by_function["MPI_Allreduce"]["count"]) == _define("callsites_main.c", "REDUCES") * RANKS


def test_c_program_without_g_gives_function_names(tmp_path):
    mpi, exe = _build_c(tmp_path, [])
    rows = _run(mpi, [exe], tmp_path / "run")
    by_function = {r["function"]: r for r in rows}
    assert by_function["MPI_Allreduce"]["caller"] == "reduce_step"
    assert by_function["MPI_Sendrecv"]["caller"] == "exchange"
    assert by_function["MPI_Sendrecv"]["line"] == "0" and by_function["MPI_Sendrecv"]["file"] == ""
    assert by_function["MPI_Sendrecv"]["name"] == "MPI_Sendrecv in exchange"
    assert int(by_function["MPI_Sendrecv"]["count"]) == _define("callsites_main.c", "EXCHANGES") * RANKS


def test_fortran_call_sites_name_the_subroutine(tmp_path):
    """MPICH's `use mpi` binding (libmpifort) calls the C MPI_Allreduce: the shim takes the first
    frame outside libmpifort, the program's subroutine."""
    mpi = mpi_env.debian_mpich()
    if mpi is None or mpi.mpif90 is None:
        pytest.skip("Debian's MPICH with gfortran is not installed (apt-get install mpich libmpich-dev gfortran)")
    exe = mpi_env.Builder(str(tmp_path)).build("callsites.f90", mpi.mpif90, ["-g"])
    rows = _run(mpi, [exe], tmp_path / "run")
    reduce_row = {r["function"]: r for r in rows}["MPI_Allreduce"]
    assert reduce_row["caller"] == "halo_step_"
    assert os.path.basename(reduce_row["file"]) == "callsites.f90"
    assert int(reduce_row["line"]) == _line_of("callsites.f90", "site: allreduce")
    assert int(reduce_row["count"]) == _define("callsites.f90", "steps") * RANKS


def test_mpi4py_call_sites_are_the_extension_frame(tmp_path):
    """mpi4py makes the calls from its extension module: the site is that object and its
    function (docs/outputs.md, callsites), with the exact count."""
    mpi = mpi_env.wheel_mpi()
    program = os.path.join(mpi_env.PROGRAMS, "callsites_py.py")
    rows = _run(mpi, [sys.executable, program], tmp_path / "run")
    barrier = [r for r in rows if r["function"] == "MPI_Barrier"]
    assert len(barrier) == 1
    import mpi4py.MPI

    assert os.path.realpath(barrier[0]["object"]) == os.path.realpath(mpi4py.MPI.__file__)
    assert barrier[0]["caller"]
    assert int(barrier[0]["count"]) == _define("callsites_py.py", "STEPS") * RANKS


def test_sums_and_cov_by_hand(tmp_path):
    """Accumulator over two blocks (a call site's calls cut across them): count, time, wait,
    bytes, path time and the COV of the ranks' times, worked out by hand.  No sites files: every
    call's site is unknown (0), one row per MPI function."""
    from mpigraph.callsites.stats import Accumulator, Sites
    from mpigraph.trace import functions as mf
    from mpigraph.util.names import Labels

    (tmp_path / "raw").mkdir()
    acc = Accumulator(Sites(str(tmp_path / "raw"), range(2)), 2)
    send = list(mf.names_array()).index("MPI_Send")

    def block(rank, start, end, wait, nbytes, on_path):
        n = len(rank)
        return {"rank": np.array(rank), "callsite": np.zeros(n, np.int64), "function": Labels(np.full(n, send),
                mf.names_array()), "start": np.array(start), "end": np.array(end), "calls": np.ones(n, np.int64),
                "wait_before": np.array(wait), "wait_after": np.zeros(n, np.int64), "bytes": np.array(nbytes),
                "on_path": np.array(on_path), "wait_state": np.full(n, -1), "wait_state_time": np.zeros(n, np.int64),
                "other_state_time": np.zeros(n, np.int64)}

    # rank 0: calls of 1 s; rank 1: calls of 1 s and 2 s (3 s): times 1 and 3, mean 2, std 1, COV 0.5.
    acc.add(block([0, 1], [0, 0], [10**9, 10**9], [5, 7], [8, 16], [True, False]))
    acc.add(block([1], [5 * 10**9], [7 * 10**9], [1], [32], [True]))
    table = acc.table()
    assert table["callsite"].tolist() == [0] and table["function"].tolist() == ["MPI_Send"]
    assert table["count"].tolist() == [3] and table["time"].tolist() == [4 * 10**9]
    assert table["wait"].tolist() == [13] and table["bytes"].tolist() == [56]
    assert table["path_time"].tolist() == [3 * 10**9] and table["ranks"].tolist() == [2]
    assert table["time_cov"][0] == pytest.approx(0.5)
    assert table["name"].tolist() == ["MPI_Send at an unknown site"]


def test_fortran_2008_calls_are_all_named_in_the_program(tmp_path):
    """calls_f08.f90 (use mpi_f08): MPICH's f08 routines with buffers go through libmpifort to the
    C wrappers, those without through the shim's own bindings (csrc/fortran.c); either way every
    call site is a line of the program, none inside libmpifort or the shim."""
    mpi = mpi_env.debian_mpich()
    if mpi is None or mpi.mpif90 is None:
        pytest.skip("Debian's MPICH with gfortran is not installed (apt-get install mpich libmpich-dev gfortran)")
    exe = mpi_env.Builder(str(tmp_path)).build("calls_f08.f90", mpi.mpif90, ["-g"])
    rows = _run(mpi, [exe], tmp_path / "run")
    assert {r["function"] for r in rows} >= {"MPI_Init", "MPI_Bcast", "MPI_Barrier", "MPI_Finalize"}
    for r in rows:
        assert os.path.realpath(r["object"]) == os.path.realpath(exe), r
        assert os.path.basename(r["file"]) == "calls_f08.f90" and int(r["line"]) > 0, r


def _send_block(rank, start, end, wait, nbytes, on_path):
    from mpigraph.trace import functions as mf
    from mpigraph.util.names import Labels

    n = len(rank)
    send = list(mf.names_array()).index("MPI_Send")
    return {"rank": np.array(rank), "callsite": np.zeros(n, np.int64), "function": Labels(np.full(n, send),
            mf.names_array()), "start": np.array(start), "end": np.array(end), "calls": np.ones(n, np.int64),
            "wait_before": np.array(wait), "wait_after": np.zeros(n, np.int64), "bytes": np.array(nbytes),
            "on_path": np.array(on_path), "wait_state": np.full(n, -1), "wait_state_time": np.zeros(n, np.int64),
            "other_state_time": np.zeros(n, np.int64)}


class _TwoRanksAtRoot:
    """A comm of two analysis ranks seen from rank 0: gather returns this rank's part and the
    other's (what MPI's gather would)."""

    rank, size = 0, 2

    def __init__(self, other):
        self.other = other

    def gather(self, part, root=0):
        return [part, self.other.sums.totals()]


def test_sums_of_two_analysis_ranks_combine_to_the_table_of_one(tmp_path):
    """Analysis rank 0 owns trace rank 0, rank 1 trace rank 1: the table combined from their
    sums (Accumulator.combined) equals the one accumulator that saw every call, COV included
    (times 1 s and 3 s: mean 2, std 1, COV 0.5)."""
    from mpigraph.callsites.stats import Accumulator, Sites

    (tmp_path / "raw").mkdir()
    raw = str(tmp_path / "raw")
    rank0 = _send_block([0], [0], [10**9], [5], [8], [True])
    rank1 = [_send_block([1], [0], [10**9], [7], [16], [False]), _send_block([1], [5 * 10**9], [7 * 10**9], [1],
                                                                             [32], [True])]
    one = Accumulator(Sites(raw, range(2)), 2)
    for b in [rank0] + rank1:
        one.add(dict(b))
    first, second = Accumulator(Sites(raw, [0]), 2), Accumulator(Sites(raw, [1]), 2)
    first.add(dict(rank0))
    for b in rank1:
        second.add(dict(b))
    combined, whole = first.combined(_TwoRanksAtRoot(second)), one.table()
    assert combined.keys() == whole.keys()
    for name in whole:
        assert np.array_equal(combined[name], whole[name]), name
    assert combined["count"].tolist() == [3] and combined["ranks"].tolist() == [2]
    assert combined["time_cov"][0] == pytest.approx(0.5)


def test_a_path_segment_names_the_call_it_is_time_in():
    """callsites.path: an mpi segment is the longest call it overlaps (a threshold block of
    several calls is named after its longest), a message segment the call holding its end (the
    call ending there on a tie); a time between calls holds none (-1)."""
    from mpigraph.callsites import path as path_sites

    # Calls of one rank: [0, 10], [12, 40], [41, 45], [50, 60].
    starts, ends = np.array([0, 12, 41, 50]), np.array([10, 40, 45, 60])
    # Segments: a block over calls 0-2 (longest: call 1), call 3 alone, a point inside call 2.
    lo, hi = np.array([0, 50, 43]), np.array([45, 60, 43])
    assert path_sites._longest_overlapping(starts, ends, lo, hi).tolist() == [1, 3, 2]
    # Message ends: at 10 (call 0 ends there), 45 (call 2), 47 (between calls), 60 (call 3).
    assert path_sites._holding(starts, ends, np.array([10, 45, 47, 60])).tolist() == [0, 2, -1, 3]


def test_the_diagnosis_names_the_call_site_of_a_function():
    """report.diagnosis.site_place: the site with all of a function's wait alone, else its share;
    nothing without the table or for a function without a known site."""
    from mpigraph.report import diagnosis

    sites = {"callsite": np.array([1, 2, 3, 0]), "function": np.array(["MPI_Allreduce", "MPI_Recv", "MPI_Recv",
                                                                       "MPI_Send"], object),
             "name": np.array(["MPI_Allreduce at solver.c:212", "MPI_Recv at halo.c:40", "MPI_Recv in exchange",
                               "MPI_Send at an unknown site"], object),
             "wait": np.array([500, 70, 30, 9]), "time": np.array([900, 80, 40, 9])}
    assert diagnosis.site_place(sites, "MPI_Allreduce") == " at solver.c:212"
    assert diagnosis.site_place(sites, "MPI_Recv") == " (70% at halo.c:40)"
    assert diagnosis.site_place(sites, "MPI_Send") == ""
    assert diagnosis.site_place(None, "MPI_Allreduce") == ""


def test_the_summary_section_leaves_phase_marks_out():
    """The phase API's marks (mpigraph_phase_begin/_end) have call sites in callsites.csv but are
    no MPI calls: the summary's call-site section, like its function table, leaves them out."""
    from mpigraph.callsites import stats

    table = {"callsite": np.array([2, 1]), "name": np.array(["MPI_Send at a.c:3", "mpigraph_phase_begin at a.c:2"],
                                                            object),
             "function": np.array(["MPI_Send", "mpigraph_phase_begin"], object), "count": np.array([4, 2]),
             "time": np.array([10, 0]), "wait": np.array([0, 0]), "time_cov": np.array([0.0, 0.0]),
             "path_time": np.array([5, 0])}
    text = "\n".join(stats.summary_lines(table))
    assert "MPI_Send at a.c:3" in text and "phase_begin" not in text



def _names_by_pyelftools(path):
    """function(vaddr) as resolve.ObjectIndex found it before it read the table as an array:
    pyelftools' symbol objects sorted by (address, size, name), the last at or before vaddr."""
    from elftools.elf.elffile import ELFFile

    with open(path, "rb") as f:
        elf = ELFFile(f)
        table = elf.get_section_by_name(".symtab") or elf.get_section_by_name(".dynsym")
        rows = sorted((s["st_value"], s["st_size"], s.name) for s in table.iter_symbols()
                      if s["st_info"]["type"] in ("STT_FUNC", "STT_GNU_IFUNC") and s["st_value"])
    lo = np.array([r[0] for r in rows], np.int64)
    hi = np.array([r[0] + max(r[1], 1) for r in rows], np.int64)

    def function(vaddr):
        i = int(np.searchsorted(lo, vaddr, side="right")) - 1
        return rows[i][2] if i >= 0 and vaddr < hi[i] else ""
    return function, lo, hi


def test_function_symbols_read_as_an_array_name_what_pyelftools_names():
    """resolve.ObjectIndex reads the symbol table as one array of entries and a name from the
    string table only where an address is looked up: at each function's first byte, the byte
    before, its last byte and the one after, the name pyelftools' symbol objects give.  libarrow
    (a C++ library, 74 k functions) has aliases, one address and size under several names
    (constructors' C1 and C2): the last name in sort order, as before."""
    from mpigraph.callsites import resolve

    assert resolve._symbol_dtype(64, True).itemsize == 24 and resolve._symbol_dtype(32, False).itemsize == 16
    import pyarrow
    from mpigraph.shim import lib

    objects = [lib.library_path()]
    objects += sorted(p for p in os.listdir(os.path.dirname(pyarrow.__file__)) if p.startswith("libarrow.so."))[:1]
    objects = [p if os.path.isabs(p) else os.path.join(os.path.dirname(pyarrow.__file__), p) for p in objects]
    assert len(objects) == 2, objects
    for path in objects:
        expected, lo, hi = _names_by_pyelftools(path)
        index = resolve.ObjectIndex(path)
        assert np.array_equal(index.sym_lo, lo) and np.array_equal(index.sym_hi, hi), path
        picked = np.random.default_rng(0).permutation(len(lo))[:4000]
        for vaddr in np.concatenate([lo[picked], lo[picked] - 1, hi[picked] - 1, hi[picked]]).tolist():
            assert index.function(vaddr) == expected(vaddr), (path, hex(vaddr))


def _many_lines_library(tmp_path):
    """A shared library of three compile units of 200 small functions each (loops, branches,
    inlining at -O2 -g): tens of thousands of line rows, with lines going back and forth."""
    sources = []
    for unit in range(3):
        body = ["static int table%d[64];" % unit]
        for f in range(200):
            body.append("int f%d_%d(int n) {\n  int s = %d;\n  for (int i = 0; i < n; i++) {\n"
                        "    if (i %% %d == 0)\n      s += table%d[i & 63];\n    else\n      s ^= i * %d;\n  }\n"
                        "  return s;\n}" % (unit, f, f, f % 7 + 2, unit, f + 1))
        path = tmp_path / ("unit%d.c" % unit)
        path.write_text("\n".join(body) + "\n")
        sources.append(str(path))
    library = str(tmp_path / "libmany.so")
    subprocess.run([mpi_env.wheel_mpi().mpicc, "-O2", "-g", "-shared", "-fPIC", "-o", library] + sources, check=True)
    return library


@pytest.mark.parametrize("flags", [["-gdwarf-4"], ["-gdwarf-5", "-O2"], None])
def test_line_programs_decoded_in_c_give_pyelftools_rows(tmp_path, monkeypatch, flags):
    """callsites.line_kernel decodes each compile unit's line program in C: the same (address,
    line, file) rows as pyelftools' decoding (MPIGRAPH_LINE_KERNEL=off), DWARF 4 and 5, at -O2
    (discriminators, many sequences), and a library of three units with many rows."""
    from elftools.elf.elffile import ELFFile

    from mpigraph.callsites import line_kernel, resolve

    path = _many_lines_library(tmp_path) if flags is None else _build_c(tmp_path, flags)[1]
    with open(path, "rb") as f:
        dwarf = ELFFile(f).get_dwarf_info()
        units = list(dwarf.iter_CUs())
        program = dwarf.line_program_for_CU(units[0])
        assert line_kernel.decode(program) is not None      # the kernel ran
        in_c = resolve._line_rows(dwarf, units)
        monkeypatch.setenv("MPIGRAPH_LINE_KERNEL", "off")
        assert line_kernel.decode(program) is None
        in_python = resolve._line_rows(dwarf, units)
    assert len(in_c[0]) > 50
    assert np.array_equal(in_c[0], in_python[0]) and np.array_equal(in_c[1], in_python[1])
    assert in_c[2] == in_python[2]


def test_analysis_ranks_share_the_resolution_of_their_sites(c_run_g):
    """With 2 analysis ranks each reading one trace rank's sites, the program's sites are
    resolved on one of them (the last: rank 0 writes the small tables), not on both, and both
    get the places and ids one Sites of every trace rank gives."""
    out, _ = c_run_g
    check = os.path.join(os.path.dirname(__file__), "callsites_share_check.py")
    returncode, stdout, stderr = mpi_env.run_guarded([sys.executable, check, out / "raw", RANKS], 2)
    assert returncode == 0, stdout[-4000:] + stderr[-4000:]
    resolved = dict(re.findall(r"rank (\d) resolved (\d+)", stdout))
    assert resolved.keys() == {"0", "1"}
    assert resolved["0"] == "0" and int(resolved["1"]) > 0, stdout


def test_an_objects_dwarf_is_read_once_for_all_its_sites(c_run_g, monkeypatch):
    """stats.Sites resolves every site of its ranks in one resolve.batch(): the program's DWARF
    (sections and relocations, read by pyelftools' get_dwarf_info) once, though its sites fall in
    two compile units; outside a batch each unit read reads it again."""
    from elftools.elf.elffile import ELFFile

    from mpigraph.callsites import resolve, stats

    out, rows = c_run_g
    reads = []
    original = ELFFile.get_dwarf_info
    monkeypatch.setattr(ELFFile, "get_dwarf_info", lambda self, *a, **k: reads.append(1) or original(self, *a, **k))
    resolve.object_index.cache_clear()
    sites = stats.Sites(str(out / "raw"), range(RANKS))
    named = {(place[2], place[3]) for place in sites.places[1:]}
    assert {os.path.basename(f) for f, line in named if line} == {"callsites_main.c", "callsites_halo.c"}
    assert len(reads) == 1
    reads.clear()
    resolve.object_index.cache_clear()
    key = next(k for k in sites._found if os.path.basename(sites._found[k][2]) == "callsites_halo.c")
    other = next(k for k in sites._found if os.path.basename(sites._found[k][2]) == "callsites_main.c")
    assert resolve.locate(key[0], key[1])[1:] == sites._found[key][2:4]
    assert resolve.locate(other[0], other[1])[1:] == sites._found[other][2:4]
    assert len(reads) == 3      # the ranges, then each unit: read again outside a batch
