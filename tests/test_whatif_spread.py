"""whatif on several analysis ranks (mpigraph/whatif/spread.py): the pieces between global
synchronisation points spread over the ranks give the whole graph's answers, identical for
K = 1, 2, 3 (the checks that need several processes: tests/mpi_whatif_spread_checks.py)."""

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


@pytest.mark.parametrize("args", [[], ["--model", "loggps", "--bandwidth", "0.02:0.1ns"],
                                  ["--latency", "0:0.3us", "--tolerance", "1,50,200"],
                                  ["--collectives", "dissemination"]])     # no cuts: the columns shared
def test_cli_files_are_the_same_for_every_K(halo_run, tmp_path, args):
    """`mpiexec -n K mpigraph whatif` on a synthetic run: the same files, byte for byte, for
    K = 1, 2, 3, T(0) the measured run time, and with --verbose every rank solved pieces."""
    run_dir, expected = halo_run
    outs = []
    for k in KS:
        out = tmp_path / ("K%d" % k)
        done = mpi_env.mpigraph(["whatif", run_dir, "--out", out, "--verbose"] + args, nprocs=k)
        assert done.returncode == 0, done.stderr
        rows = [line.split() for line in done.stdout.splitlines() if "whatif solve" in line]
        assert sorted(int(r[0]) for r in rows) == list(range(k)), done.stdout
        assert all(int(r[1]) > 0 for r in rows), done.stdout         # pieces on every rank
        outs.append(out)
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
