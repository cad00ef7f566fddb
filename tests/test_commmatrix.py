"""The communication matrix, the size histograms and the communicators of known programs
(tests/programs/traffic.c): every expected number is derived here from the program's pattern,
not read from a run."""

import os

import numpy as np
import pytest

import mpi_env

RANKS = 4
ITER = 3


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    mpi = mpi_env.wheel_mpi()
    assert mpi, "no mpicc/mpiexec found: install with pip install '.[mpich,test]'"
    exe = mpi_env.Builder(str(tmp_path_factory.mktemp("programs"))).build("traffic.c", mpi.mpicc)
    done = {}

    def run(mode):
        if mode not in done:
            out = tmp_path_factory.mktemp("runs") / mode
            result = mpi_env.mpirun(mpi, RANKS, [exe, mode, ITER], out=out, rank_env={"MPIGRAPH_QUIET": "1"})
            assert result.returncode == 0, result.stdout + result.stderr
            done[mode] = str(out)
        return done[mode]
    return run


def matrix_of(run_dir, kind):
    """{(src, dst): (messages, bytes)} of one kind, from the run's API (mpigraph.load)."""
    import mpigraph

    m = mpigraph.load(run_dir).comm_matrix
    m = m[m["kind"] == kind]
    return {(int(s), int(d)): (int(n), int(b)) for s, d, n, b in zip(m["src"], m["dst"], m["messages"], m["bytes"])}


def pairs(pattern):
    """{(src, dst): (messages, bytes)} of a list of (src, dst, bytes) messages of one iteration, ITER times."""
    out = {}
    for s, d, b in pattern:
        n, total = out.get((s, d), (0, 0))
        out[(s, d)] = (n + ITER, total + ITER * b)
    return out


def test_ring_is_each_rank_to_the_next(runs):
    expected = pairs([(r, (r + 1) % RANKS, 1000) for r in range(RANKS)])
    assert matrix_of(runs("ring"), "p2p") == expected
    assert matrix_of(runs("ring"), "collective") == {}


def test_2d_halo_is_each_rank_to_its_grid_neighbours(runs):
    px, py = 2, RANKS // 2
    pattern = []
    for r in range(RANKS):
        x, y = r % px, r // px
        for dx, dy, b in ((1, 0, 800), (-1, 0, 800), (0, 1, 1600), (0, -1, 1600)):
            if 0 <= x + dx < px and 0 <= y + dy < py:         # not periodic: edges send to MPI_PROC_NULL
                pattern.append((r, (y + dy) * px + x + dx, b))
    assert matrix_of(runs("halo"), "p2p") == pairs(pattern)


def test_all_to_all_point_to_point_and_mpi_alltoall(runs):
    run = runs("alltoall")
    others = [(s, d) for s in range(RANKS) for d in range(RANKS) if s != d]
    assert matrix_of(run, "p2p") == pairs([(s, d, 8 * (1 + 4 * s + d)) for s, d in others])
    # MPI_Alltoall of 3 ints per destination: each member -> each other member 12 bytes a call.
    assert matrix_of(run, "collective") == pairs([(s, d, 12) for s, d in others])


def test_collectives_are_apportioned_by_the_documented_rules(runs):
    run = runs("colls")
    pattern = [(1, d, 100) for d in range(RANKS) if d != 1]              # Bcast, root 1
    pattern += [(s, 2, 40) for s in range(RANKS) if s != 2]              # Gather of 10 ints, root 2
    pattern += [(0, d, 48) for d in range(RANKS) if d != 0]              # Scatter of 6 doubles, root 0
    pattern += [(s, d, 12) for s in range(RANKS) for d in range(RANKS) if s != d]     # Allgather of 3 ints
    pattern += [(0, 2, 7), (1, 3, 7)]      # Bcast on the even/odd split, each half's rank 0 the root
    got = matrix_of(run, "collective")
    unpaired = {k: v for k, v in got.items() if k[1] == -1}
    assert {k: v for k, v in got.items() if k[1] != -1} == pairs(pattern)
    # Allreduce of 5 doubles: no pairs, each rank's bytes under dst -1.
    assert unpaired == {(r, -1): (ITER, ITER * 40) for r in range(RANKS)}
    # The Send on each half, from its rank 0 to its rank 1: world ranks 0 -> 2 and 1 -> 3.
    assert matrix_of(run, "p2p") == pairs([(0, 2, 5), (1, 3, 5)])


def test_histograms_equal_the_sizes_sent(runs):
    import mpigraph

    sizes = mpigraph.load(runs("sizes")).sizes
    sent = [0, 1, 3, 1000, 1024, 70000]
    for function in ("MPI_Send", "MPI_Recv"):
        rows = sizes[sizes["function"] == function]
        got = {(int(lo), int(hi)): (int(n), int(b)) for lo, hi, n, b in zip(rows["bin_lo"], rows["bin_hi"],
                                                                          rows["count"], rows["bytes"])}
        expected = {}
        for b in sent:
            lo = 0 if b == 0 else 1 << (b.bit_length() - 1)
            hi = 0 if b == 0 else 2 * lo - 1
            n, total = expected.get((lo, hi), (0, 0))
            expected[(lo, hi)] = (n + ITER, total + ITER * b)
        assert got == expected, function
        assert set(rows["comm"]) == {"world"}


def test_collective_sizes_per_communicator(runs):
    import mpigraph

    sizes = mpigraph.load(runs("colls")).sizes
    bcast = sizes[sizes["function"] == "MPI_Bcast"]
    by_comm = {c: (int(n), int(b)) for c, n, b in zip(bcast["comm"], bcast["count"], bcast["bytes"])}
    # Every member counts its own call: 4 members x ITER of 100 bytes on world, 2 x ITER of 7 on each half.
    assert by_comm == {"world": (RANKS * ITER, RANKS * ITER * 100), "split#1 (2 ranks)": (2 * ITER, 2 * ITER * 7),
                       "split#2 (2 ranks)": (2 * ITER, 2 * ITER * 7)}


def test_communicators_are_named_with_members_and_creating_call(runs):
    import mpigraph

    run = mpigraph.load(runs("colls"))
    comms = run.communicators
    assert list(comms["name"]) == ["world", "split#1 (2 ranks)", "split#2 (2 ranks)"]
    assert list(comms["members"]) == ["0 1 2 3", "0 2", "1 3"]
    assert list(comms["function"]) == ["MPI_Init", "MPI_Comm_split", "MPI_Comm_split"]
    # The split is world rank 0's call after Init, Comm_rank/size (not recorded) and 5 x ITER collectives.
    calls = run.calls
    split_call = calls[(calls["rank"] == 0) & (calls["function"] == "MPI_Comm_split")]["call"].tolist()
    assert comms["call"].tolist()[1] == split_call[0]
    assert set(comms["id"][1:]) == set(calls[calls["function"] == "MPI_Comm_free"]["comm"])
    with open(os.path.join(runs("colls"), "summary.txt")) as f:
        summary = f.read()
    assert "world" in summary


def test_the_heatmap_has_a_cell_per_pair(runs):
    with open(os.path.join(runs("ring"), "commmatrix.svg")) as f:
        svg = f.read()
    assert svg.count("<title>") == RANKS
    for r in range(RANKS):
        assert "<title>%d -&gt; %d: %d bytes</title>" % (r, (r + 1) % RANKS, ITER * 1000) in svg


def test_apportioning_units():
    """Bins at the powers of two and a communicator's member rule."""
    from mpigraph.traffic import communicators, sizes

    lo, hi = sizes.bins(np.array([0, 1, 2, 3, 4, 1023, 1024, 2**40 + 5]))
    assert lo.tolist() == [0, 1, 2, 2, 4, 512, 1024, 2**40]
    assert hi.tolist() == [0, 1, 3, 3, 7, 1023, 2047, 2**41 - 1]
    assert communicators.member_text(np.arange(0, 64, 2)) == "0-62:2"
    assert communicators.member_text(np.arange(100)) == "0-99"
    assert communicators.member_text([3, 1]) == "3 1"


def test_two_analysis_ranks_give_the_same_tables(runs, tmp_path):
    """Each analysis rank sums the ranks it owns: the tables do not depend on how many there are."""
    for mode in ("colls", "alltoall"):
        out = tmp_path / mode
        result = mpi_env.mpigraph(["analyze", runs(mode), "--out", out, "--quiet"], nprocs=2)
        assert result.returncode == 0, result.stdout + result.stderr
        for name in ("commmatrix.csv", "sizes.csv", "communicators.csv"):
            with open(os.path.join(runs(mode), name)) as a, open(out / name) as b:
                assert a.read() == b.read(), (mode, name)


def test_communicator_names_from_creation_rows():
    """Names: world, self, <call>#k (n ranks) in creation order per creating call, an unknown id as itself;
    members in the communicator's rank order, None for an intercommunicator."""
    from mpigraph.report import writer
    from mpigraph.traffic import communicators as comms

    split, dup, inter = (2 << 32) | 1, (3 << 32) | 0, (4 << 32) | 0
    split_id, dup_id = 80, 81          # MPI_Comm_split, MPI_Comm_dup (trace/functions.py)
    rows = {"comm": [split, split, dup, dup, dup, inter], "rank": [3, 1, 0, 1, 2, 0], "comm_rank": [0, 1, 2, 1, 0, 0],
            "size": [2, 2, 3, 3, 3, 1], "inter": [False, False, False, False, False, True],
            "func": [split_id, split_id, dup_id, dup_id, dup_id, split_id], "call": [7, 7, 9, 9, 9, 11],
            "parent": [0, 0, split, split, split, 0], "site": [5, 6, 0, 0, 4, 0]}
    known = comms.Communicators(comms.concat([rows]), 4)
    assert [known.name(i) for i in (0, (1 << 32) | 2, split, dup, inter, 12345)] == \
        ["world", "self", "split#1 (2 ranks)", "dup#1 (3 ranks)", "split#2 (1 ranks)", "12345"]
    assert known.members(split).tolist() == [3, 1] and known.members(dup).tolist() == [2, 1, 0]
    assert known.members(inter) is None
    table = known.table()
    assert table["parent"].tolist() == ["", "world", "split#1 (2 ranks)", "world"]
    assert table["call"].tolist() == [0, 7, 9, 11]
    # The creating call's rank (its member of rank 0) and its shim call-site id there.
    assert table["creator"].tolist() == [-1, 3, 2, 0] and table["creator_site"].tolist() == [0, 5, 4, 0]
    assert table["members"].tolist()[3] == "intercommunicator"
    assert writer._unmatched_section({"rank": [0], "function": ["MPI_Send"], "what": ["send"], "call": [4],
                                      "comm": [split], "peer": [1], "tag": [0], "bytes": [8],
                                      "reason": ["no matching receive"]}, known)[1] == \
        "  rank 0 MPI_Send send (call 4, comm split#1 (2 ranks), peer 1, tag 0, 8 bytes): no matching receive"
