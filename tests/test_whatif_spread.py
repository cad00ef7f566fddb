"""whatif on several analysis ranks (mpigraph/whatif/spread.py, distributed.py): the model graph
built on the ranks and its pieces between global synchronisation points spread over them give
the whole graph's answers, identical for K = 1, 2, 3 and to rank 0's build (the checks that need
several processes: tests/mpi_whatif_spread_checks.py)."""

import filecmp
import os

import numpy as np
import pytest

import mpi_env
from mpigraph.whatif.envelope import Edges
from mpigraph.whatif.spread import _blocks, plan

KS = (1, 2, 3)


def test_plan_gives_contiguous_blocks_of_about_equal_edges():
    # 6 units of 10, 10, 40, 10, 10, 20 edges on 2 ranks: rank 1 starts where 50 of 100 are before
    piece = np.repeat(np.arange(6), [10, 10, 40, 10, 10, 20])
    n = len(piece) + 1
    edges = Edges(n, np.arange(len(piece)), np.arange(1, n), np.ones(len(piece)), np.zeros(len(piece)),
                  np.zeros(len(piece)), np.zeros(n), np.arange(6) * 0 + n - 1)
    p = plan(edges, piece, 2)
    assert list(p.first_unit) == [0, 3, 6] and list(p.edges_per_rank) == [60, 40]
    # 4 ranks: unit u goes to floor(4 * edges before u / 100): edges before 0, 10, 20, 60, 70, 80
    # give ranks 0, 0, 0, 2, 2, 3; rank 1 holds none (unit 2 is 40 of the 100 edges)
    p = plan(edges, piece, 4)
    assert list(p.first_unit) == [0, 3, 3, 5, 6] and not p.replicate
    assert list(p.edges_per_rank) == [60, 0, 20, 20]
    # more ranks than units: every rank holds the whole graph (the columns are shared instead)
    p = plan(edges, piece, 8)
    assert p.replicate and list(p.edges_per_rank) == [100] * 8
    assert all(len(b[0]["edge"]) == 100 for b in _blocks(edges, piece, p))
    blocks = _blocks(edges, piece, plan(edges, piece, 2))
    assert [len(b[0]["edge"]) for b in blocks] == [60, 40]
    assert list(blocks[1][0]["unit"][:1]) == [0] and blocks[1][0]["edge"][0] == 60


@pytest.mark.parametrize("n", [1, 2, 9, 10, 11, 1001])
def test_stand_in_gives_numpys_median_and_percentile_to_the_bit(n):
    """distributed.stand_ins finds the values np.median and np.percentile read by bisection on
    their bits: the stand-in array gives numpy's answers on the values themselves, with ties,
    negative values and zeros among them (the K-rank case: mpi_whatif_spread_checks.py's o and
    delivery base against rank 0's)."""
    from mpi4py import MPI

    from mpigraph.whatif import distributed

    rng = np.random.default_rng(n)
    x = rng.normal(size=n) * 1e4
    x[: n // 2] = np.round(x[: n // 2] / 100)        # ties
    x[: n // 5] = 0.0
    requests = [(x, distributed._median_positions), (x, distributed._tenth_positions),
                (np.zeros(0), distributed._median_positions)]
    median, tenth, none = distributed.stand_ins(MPI.COMM_SELF, requests)
    assert len(median) == n and np.median(median) == np.median(x)
    assert np.percentile(tenth, 10) == np.percentile(x, 10)
    assert none.size == 0


@pytest.fixture(scope="module")
def spread_records(tmp_path_factory):
    out = tmp_path_factory.mktemp("spread")
    for k in KS:
        code, stdout, stderr = mpi_env.run_mpi_checks("mpi_whatif_spread_checks.py", k,
                                                      {"MPIGRAPH_TEST_OUT": str(out)})
        assert code == 0, "K=%d:\n%s\n%s" % (k, stdout[-3000:], stderr[-3000:])
    return out


@pytest.mark.parametrize("name", ["spread", "columns", "uneven"])
def test_spread_equals_the_whole_graph_and_is_the_same_for_every_K(spread_records, name):
    first = (spread_records / ("%s-1.json" % name)).read_text()
    for k in KS[1:]:
        assert (spread_records / ("%s-%d.json" % (name, k))).read_text() == first, "K=%d differs from K=1" % k


@pytest.fixture(scope="module")
def halo_run(tmp_path_factory):
    from mpigraph.testing import synth

    out = tmp_path_factory.mktemp("halo") / "run"
    expected = synth.generate(str(out), 4, 62, "halo")      # 10 phases of a halo exchange + Allreduce
    return str(out), expected


def per_rank(stdout):
    """--verbose's first table: per rank (records, built, sent, received, pieces, edges)."""
    lines = stdout.splitlines()
    at = next(i for i, line in enumerate(lines) if line.split()[:3] == ["rank", "records", "built"])
    rows = {}
    for line in lines[at + 1:]:
        words = line.split()
        if words[:2] == ["rank", "step"]:
            break
        rows[int(words[0])] = [int(w) for w in words[1:]]
    return rows


@pytest.mark.parametrize("args", [[], ["--model", "loggps", "--bandwidth", "0.02:0.1ns"],
                                  ["--latency", "0:0.3us", "--tolerance", "1,50,200"],
                                  ["--overhead", "auto"],
                                  ["--collectives", "dissemination"]])     # no cuts: the columns shared
def test_cli_files_are_the_same_for_every_K(halo_run, tmp_path, args):
    """`mpiexec -n K mpigraph whatif` on a synthetic run: the same files, byte for byte, for
    K = 1, 2, 3 and as rank 0's build of the whole graph (--build rank0), T(0) the measured run
    time; with --verbose every rank solved pieces and, where the graph is built on the ranks,
    read its own trace ranks' records (together every record once), built edges, and the
    edges sent are the edges received."""
    run_dir, expected = halo_run
    outs = []
    records = expected.params.records_per_rank * len(expected.ranks)
    on_ranks = "--collectives" not in args           # dissemination: rank 0 builds (distributed.py's doc)
    for k in KS:
        out = tmp_path / ("K%d" % k)
        done = mpi_env.mpigraph(["whatif", run_dir, "--out", out, "--verbose"] + args, nprocs=k)
        assert done.returncode == 0, done.stderr
        rows = per_rank(done.stdout)
        assert sorted(rows) == list(range(k)), done.stdout
        assert all(r[4] > 0 for r in rows.values()), done.stdout         # pieces on every rank
        assert sum(r[0] for r in rows.values()) == records, done.stdout   # every record read once
        if on_ranks:
            assert "built on every analysis rank" in done.stdout
            assert all(r[0] > 0 and r[1] > 0 for r in rows.values()), done.stdout   # 4 trace ranks, K <= 3
            assert sum(r[2] for r in rows.values()) == sum(r[3] for r in rows.values()), done.stdout
            assert (k > 1) == (sum(r[2] for r in rows.values()) > 0), done.stdout
        else:
            assert "rank 0 (--collectives dissemination" in done.stdout
            assert rows[0][0] == records, done.stdout
        outs.append(out)
    whole = tmp_path / "rank0"
    done = mpi_env.mpigraph(["whatif", run_dir, "--out", whole, "--build", "rank0"] + args)
    assert done.returncode == 0, done.stderr
    outs.append(whole)
    names = sorted(os.listdir(outs[0]))
    assert "whatif_pieces.csv" in names and "tolerance.csv" in names
    for out in outs[1:]:
        match, mismatch, errors = filecmp.cmpfiles(outs[0], out, names, shallow=False)
        assert not mismatch and not errors, (out, mismatch, errors)
    if not args:
        import csv

        with open(outs[0] / "tolerance.csv", newline="") as f:
            t0 = float(next(csv.DictReader(f))["T0_s"])
        starts = [v["program_start"] for v in expected.ranks.values()]
        ends = [v["program_end"] for v in expected.ranks.values()]
        assert t0 == pytest.approx((max(ends) - min(starts)) * 1e-9, abs=20e-9)     # T(0): the run's time


def test_fewer_pieces_than_ranks_built_on_the_ranks(tmp_path):
    """A halo of one phase: one Allreduce, two pieces.  On 3 ranks the edges built there are
    gathered whole on every rank (the columns are shared): the files are still the same for every
    K and as rank 0's build, and every rank received the edges the others built."""
    from mpigraph.testing import synth

    run_dir = str(tmp_path / "run")
    synth.generate(run_dir, 4, 8, "halo")
    outs = []
    for k in KS:
        out = tmp_path / ("K%d" % k)
        done = mpi_env.mpigraph(["whatif", run_dir, "--out", out, "--verbose"], nprocs=k)
        assert done.returncode == 0, done.stderr
        rows = per_rank(done.stdout)
        built = sum(r[1] for r in rows.values())
        if k == 3:        # replicated: every rank solves both pieces, every edge
            assert all(r[4] == 2 and r[5] == built for r in rows.values()), done.stdout
            assert all(r[3] == built - r[1] for r in rows.values()), done.stdout
        outs.append(out)
    whole = tmp_path / "rank0"
    assert mpi_env.mpigraph(["whatif", run_dir, "--out", whole, "--build", "rank0"]).returncode == 0
    names = sorted(os.listdir(outs[0]))
    for out in outs[1:] + [whole]:
        match, mismatch, errors = filecmp.cmpfiles(outs[0], out, names, shallow=False)
        assert not mismatch and not errors, (out, mismatch, errors)


@pytest.fixture(scope="module")
def patterns_program(tmp_path_factory):
    mpi = mpi_env.wheel_mpi()
    assert mpi, "no mpicc/mpiexec found: install with pip install '.[mpich,test]'"
    return mpi, mpi_env.Builder(str(tmp_path_factory.mktemp("programs"))).build("collective_patterns.c", mpi.mpicc)


@pytest.mark.parametrize("mode", ["gather", "scan_reversed", "ibcast", "bcast_big"])
def test_rooted_scan_and_nonblocking_collectives_built_on_the_ranks(patterns_program, tmp_path, mode):
    """A real run of tests/programs/collective_patterns.c on 3 ranks (N-to-1 hubs out to the
    root only, a Scan on a communicator that reverses the ranks, a 1-to-N release from a late
    root): the graph built on K = 1, 2, 3 analysis ranks gives rank 0's build's files, byte for
    byte."""
    mpi, exe = patterns_program
    run_dir = tmp_path / "run"
    done = mpi_env.mpirun(mpi, 3, [exe, mode, 2], out=run_dir, rank_env={"MPIGRAPH_QUIET": "1"})
    assert done.returncode == 0, done.stdout + done.stderr
    outs = []
    for k, build in ((1, "rank0"), (1, "ranks"), (2, "ranks"), (3, "ranks")):
        out = tmp_path / ("%s%d" % (build, k))
        done = mpi_env.mpigraph(["whatif", run_dir, "--out", out, "--build", build, "--verbose"], nprocs=k)
        assert done.returncode == 0, done.stderr
        assert ("built on every analysis rank" in done.stdout) == (build == "ranks"), done.stdout
        outs.append(out)
    names = sorted(os.listdir(outs[0]))
    assert "critical_messages.csv" in names
    for out in outs[1:]:
        match, mismatch, errors = filecmp.cmpfiles(outs[0], out, names, shallow=False)
        assert not mismatch and not errors, (out, mismatch, errors)
