"""`mpigraph decompose` on known-answer programs (tests/programs/decompose.c, 2 ranks, the wheel's
MPICH, busy compute): spec decompose.md's must-show items 1-5 and 8.

A delay starts when a "go" message from the other rank arrives (see the program), so each
expected wait is the known delay X plus terms the trace measures: the go message's delivery,
how much longer than X a busy loop ran on a descheduled rank, the few us between two calls.
The checks are:
- sync of a call is its equation's value (eq 1-4) from the other side's call times; it is at
  least X minus the waiting rank's own measured gaps (a lower bound with no noise of the other
  rank in it: delivery and overshoot only add to a wait), and at most the late rank's own
  measured interval from the go to its call (causality: a go is received after it was sent, an
  Ssend returns after its receive was posted), so a descheduled late rank widens only the
  upper bound;
- eager senders (8 B) are never charged a wait (eq 1 not applied) and return in microseconds;
- the identities: sync + network + stack = MPI time per call, each >= 0; per-rank sums equal
  ranks.csv's MPI time; T_co <= T; on the imbalance-only program T_co is the sum over the
  Barrier intervals of the largest compute of a rank (>= K max_r X_r).
Medians and the noise terms are printed (pytest -s).  No time limits.
"""

import csv
import os
import sys

import numpy as np
import pyarrow.parquet as pq
import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import mpi_env  # noqa: E402
from mpigraph.network import decompose as dmod  # noqa: E402
from mpigraph.network.params import NetworkParams, ProtocolParams  # noqa: E402

X_NS = 1_000_000          # the late side's delay (1 ms)
C_NS = 500_000            # the deferred receiver's compute between Irecv and Wait
SHORT_NS = 200_000        # the second deferred case's delay
# The two ranks share one host and its clock: the alignment's error is the ping-pong's
# half round-trip asymmetry, microseconds; 20 us covers it with room.
CLOCK_ERROR_NS = 20_000
EAGER_SEND_NS = 100_000   # "returns in microseconds": an eager 8 B send, median over the reps
K, X0_US, X1_US = 8, 1000, 3000


def run(tmp_path_factory, builder, wheel, args):
    exe = builder.build("decompose.c", wheel.mpicc)
    out = tmp_path_factory.mktemp("run") / "run"
    result = mpi_env.mpirun(wheel, 2, [exe, *args], out=out, rank_env={"MPIGRAPH_QUIET": "1"})
    assert result.returncode == 0, result.stderr[-4000:]
    assert (out / "summary.txt").is_file(), result.stderr[-4000:]
    return out


@pytest.fixture(scope="module")
def cases(tmp_path_factory, builder, wheel):
    out = run(tmp_path_factory, builder, wheel, ["cases"])
    return out, dmod.decompose(str(out))


@pytest.fixture(scope="module")
def imbalance(tmp_path_factory, builder, wheel):
    out = run(tmp_path_factory, builder, wheel, ["imbalance", K, X0_US, X1_US])
    return out, dmod.decompose(str(out))


class Calls:
    """The decomposition's per-call table with calls.parquet's tags, as numpy columns."""

    def __init__(self, out, result):
        d = result.calls.to_pydict()
        self.col = {k: np.array(v) for k, v in d.items()}
        raw = pq.read_table(out / "calls.parquet").to_pydict()
        order = np.lexsort((np.array(raw["call"]), np.array(raw["rank"])))
        self.tag = np.array(raw["tag"])[order]
        assert np.array_equal(np.array(raw["rank"])[order], self.col["rank"])
        assert np.array_equal(np.array(raw["call"])[order], self.col["call"])

    def rows(self, rank, tag, function=None):
        pick = (self.col["rank"] == rank) & (self.tag == tag)
        if function:
            pick &= self.col["function"] == function
        return np.flatnonzero(pick)

    def next_wait(self, rows):
        """The first MPI_Wait after each row on its rank."""
        wait = np.flatnonzero(self.col["function"] == "MPI_Wait")
        out = wait[np.searchsorted(wait, rows)]
        assert np.array_equal(self.col["rank"][out], self.col["rank"][rows])
        return out

    def __getitem__(self, name):
        return self.col[name]


def eq(later_start, waiting_start, waiting_end):
    """max(0, later - waiting start) within the waiting call: seed 003's equations 1-4."""
    return np.clip(later_start - waiting_start, 0, waiting_end - waiting_start)


def test_late_sender(cases):
    """Item 1: rank 0 computes 1 ms before its 8 B send: the receive's sync is 1 ms plus the
    measured noise, the sender's 0."""
    c = Calls(*cases)
    send, recv = c.rows(0, 1, "MPI_Send"), c.rows(1, 1, "MPI_Recv")
    go = c.rows(1, 101, "MPI_Ssend")
    sync = c["sync_ns"][recv]
    assert np.array_equal(sync, eq(c["start_ns"][send], c["start_ns"][recv], c["end_ns"][recv]))
    # Rank 0's send starts >= X after rank 1's go send started (rank 0 received it): only rank 1's
    # own gap can lower the wait.
    own_gap = c["start_ns"][recv] - c["start_ns"][go]
    assert (sync >= X_NS - own_gap - CLOCK_ERROR_NS).all(), (sync, own_gap)
    # Rank 1's Ssend returned after rank 0 posted the go's receive: the wait is at most rank 0's
    # own interval from there to its send (1 ms, and more where it was descheduled).
    upper = c["start_ns"][send] - c["start_ns"][c.rows(0, 101, "MPI_Recv")]
    assert (sync <= upper + CLOCK_ERROR_NS).all(), (sync, upper)
    assert (c["sync_ns"][send] == 0).all()
    print("late sender: receiver sync median %.0f us (X = 1000 us), R median %.1f us, bounds from %.0f to %.0f us"
          % (np.median(sync) / 1e3, np.median(c["mpi_ns"][recv] - sync) / 1e3, np.median(X_NS - own_gap) / 1e3,
             np.median(upper) / 1e3))


def test_eager_late_receiver(cases):
    """Item 2: 8 B, receiver 1 ms late: the send returns in microseconds, no sync on either side."""
    c = Calls(*cases)
    send, recv = c.rows(0, 2, "MPI_Send"), c.rows(1, 2, "MPI_Recv")
    assert set(c["protocol"][send]) == {"eager"}
    returned_first = c["end_ns"][send] < c["start_ns"][recv]
    # The receiver is late by design, but a descheduled sender can make it early (under load,
    # half the iterations): at least one send must have returned before its receive began, and
    # those receives have no sync; no eager send has one, whenever its receive began.
    assert returned_first.any()
    assert (c["sync_ns"][send] == 0).all()       # eq 1 not applied to an eager send
    assert (c["sync_ns"][recv][returned_first] == 0).all()
    assert np.median(c["mpi_ns"][send]) < EAGER_SEND_NS
    assert np.array_equal(c["sync_ns"][recv], eq(c["start_ns"][send], c["start_ns"][recv], c["end_ns"][recv]))
    print("eager late receiver: send median %.1f us" % (np.median(c["mpi_ns"][send]) / 1e3))


def test_rendezvous_late_receiver(cases):
    """Item 3: 1 MiB, receiver 1 ms late: the send blocks, its sync is the delay (eq 1)."""
    c = Calls(*cases)
    send, recv, go = c.rows(0, 3, "MPI_Send"), c.rows(1, 3, "MPI_Recv"), c.rows(0, 103, "MPI_Recv")
    assert set(c["protocol"][send]) == {"rendezvous"}
    sync = c["sync_ns"][send]
    assert np.array_equal(sync, eq(c["start_ns"][recv], c["start_ns"][send], c["end_ns"][send]))
    own_gap = c["start_ns"][send] - c["start_ns"][go]       # rank 1 ends its go after rank 0's go started
    assert (sync >= X_NS - own_gap - CLOCK_ERROR_NS).all(), (sync, own_gap)
    upper = c["start_ns"][recv] - c["start_ns"][c.rows(1, 103, "MPI_Ssend")]    # rank 0 sends after the go left
    assert (sync <= upper + CLOCK_ERROR_NS).all(), (sync, upper)
    # The rendezvous sender is charged the transfer's estimate (at most its R).
    assert (c["network_est_ns"][send] > 0).all()
    print("rendezvous late receiver: sender sync median %.0f us" % (np.median(sync) / 1e3))


def test_deferred_waits(cases):
    """Item 4: Irecv, 0.5 ms compute, Wait: sync = X - C = 0.5 ms for a sender 1 ms late, 0 for
    one 0.2 ms late (eq 4); Isend, 0.2 ms, Wait with a receiver 1 ms late: 0.8 ms (eq 3)."""
    c = Calls(*cases)
    for tag, x in ((4, X_NS), (5, SHORT_NS)):
        send, irecv = c.rows(0, tag, "MPI_Send"), c.rows(1, tag, "MPI_Irecv")
        wait = c.next_wait(irecv)
        go = c.rows(1, 100 + tag, "MPI_Ssend")
        sync = c["sync_ns"][wait]
        assert np.array_equal(sync, eq(c["start_ns"][send], c["start_ns"][wait], c["end_ns"][wait]))
        assert (c["sync_ns"][irecv] == 0).all()
        own = c["start_ns"][wait] - c["start_ns"][go]         # rank 1's go .. Wait: >= C
        assert (own >= C_NS).all()
        assert (sync >= x - own - CLOCK_ERROR_NS).all()
        # rank 1's Ssend returned after rank 0 posted the go's receive
        upper = (c["start_ns"][send] - c["start_ns"][c.rows(0, 100 + tag, "MPI_Recv")]
                 - (c["start_ns"][wait] - c["end_ns"][go]))
        assert (sync <= np.maximum(upper, 0) + CLOCK_ERROR_NS).all(), (sync, upper)
        print("deferred receive, sender %d us late: Wait sync median %.0f us, rank 1's go..Wait median %.0f us"
              % (x // 1000, np.median(sync) / 1e3, np.median(own) / 1e3))
        if tag == 5:
            assert np.median(sync) == 0
    isend, recv = c.rows(0, 6, "MPI_Isend"), c.rows(1, 6, "MPI_Recv")
    wait = c.next_wait(isend)
    sync = c["sync_ns"][wait]
    assert np.array_equal(sync, eq(c["start_ns"][recv], c["start_ns"][wait], c["end_ns"][wait]))
    go0, go1 = c.rows(0, 106, "MPI_Recv"), c.rows(1, 106, "MPI_Ssend")
    own = c["start_ns"][wait] - c["start_ns"][go0]     # rank 0's go .. Wait
    assert (sync >= X_NS - own - CLOCK_ERROR_NS).all()
    upper = (c["start_ns"][recv] - c["start_ns"][go1]) - (c["start_ns"][wait] - c["end_ns"][go0])
    assert (sync <= np.maximum(upper, 0) + CLOCK_ERROR_NS).all(), (sync, upper)
    assert set(c["protocol"][isend]) == {"rendezvous"}
    print("deferred rendezvous send: Wait sync median %.0f us" % (np.median(sync) / 1e3))


@pytest.mark.parametrize("which", ["cases", "imbalance"])
def test_identities(which, request):
    """Item 5 and T_co <= T: sync + network + stack = MPI time per call, each part >= 0, per-rank
    sums equal ranks.csv's MPI time; the files are written."""
    out, result = request.getfixturevalue(which)
    c = result.calls.to_pydict()
    parts = {k: np.array(c[k]) for k in ("mpi_ns", "sync_ns", "network_est_ns", "stack_ns")}
    assert np.array_equal(parts["sync_ns"] + parts["network_est_ns"] + parts["stack_ns"], parts["mpi_ns"])
    for k in ("sync_ns", "network_est_ns", "stack_ns"):
        assert (parts[k] >= 0).all(), k
    ranks = pq.read_table(out / "ranks.parquet").to_pydict()          # ranks.csv's MPI time, in ns
    expected = np.array(ranks["mpi_time_ns"])[np.argsort(ranks["rank"])]
    assert np.array_equal(result.ranks["mpi_ns"], expected)
    with open(out / "ranks.csv", newline="") as f:
        seconds = [float(r["mpi_time_s"]) for r in sorted(csv.DictReader(f), key=lambda r: int(r["rank"]))]
    assert np.allclose(result.ranks["mpi_ns"] * 1e-9, seconds, atol=1e-9)
    table = pq.read_table(out / "decomposition.parquet").to_pydict()
    per_rank = np.bincount(table["rank"], weights=table["mpi_ns"]).astype(np.int64)
    assert np.array_equal(per_rank, result.ranks["mpi_ns"])
    assert 0 < result.compute_only_ns <= result.run_time_ns
    for name in ("decomposition_calls.parquet", "decomposition.csv", "decomposition.svg"):
        assert (out / name).is_file()
    summary = (out / "summary.txt").read_text()
    assert summary.count("MPI time decomposition") == 1 and "estimate" in summary


def test_compute_only_imbalance(imbalance):
    """Item 8: compute X_r then Barrier, K times: T_co is the sum over the intervals between the
    Barriers of the larger rank's compute (= K max_r X_r up to the busy loops' overshoot, which
    only adds), computed here from calls.parquet alone."""
    out, result = imbalance
    c = {k: np.array(v) for k, v in pq.read_table(out / "calls.parquet").to_pydict().items()}
    order = np.lexsort((c["call"], c["rank"]))
    c = {k: v[order] for k, v in c.items()}
    per_rank = []
    for r in (0, 1):
        mine = c["rank"] == r
        start, end, func = c["start_ns"][mine], c["end_ns"][mine], c["function"][mine]
        gaps = np.maximum(start[1:] - end[:-1], 0)
        # interval i: the gaps up to and including the one before the i-th Barrier; the last: to Finalize
        interval = np.concatenate([[0], np.cumsum(func[1:-1] == "MPI_Barrier")])
        intervals = np.bincount(interval, weights=gaps, minlength=K + 1)
        intervals[0] += end[0]        # the graph starts a rank where its MPI_Init ended (from the run's start)
        per_rank.append(intervals)
    expected = np.maximum(*per_rank).sum()
    assert abs(result.compute_only_ns - expected) <= K + 2, (result.compute_only_ns, expected)
    assert result.compute_only_ns >= K * max(X0_US, X1_US) * 1000
    assert result.compute_only_ns <= result.run_time_ns
    print("imbalance: T_co %.3f ms, K max X %.3f ms, T %.3f ms"
          % (result.compute_only_ns / 1e6, K * max(X0_US, X1_US) / 1e3, result.run_time_ns / 1e6))


# ---- without MPI: the protocol inference and the network split on made-up messages -----------

def _params(S=8192):
    return NetworkParams([ProtocolParams("eager", 5e-6, 3e-10, 0, 0, 0, 0, S, "same-host"),
                          ProtocolParams("rendezvous", 10e-6, 7.5e-10, 0, 0, 0, 0, S, "same-host")])


def test_threshold_between_the_sizes():
    """Eager seen up to 4 KiB, rendezvous from 64 KiB: S = 64 KiB, the bracket (4 KiB, 64 KiB]."""
    nbytes = np.array([8, 4096, 65536, 1 << 20, 16384])
    evidence = np.array([dmod.EAGER, dmod.EAGER, dmod.RENDEZVOUS, dmod.RENDEZVOUS, 0])
    assert dmod.infer_threshold(nbytes, evidence) == (65536, 4096, 65536)


def test_network_charge_where_the_receiver_waited():
    """Receiver network = max(0, TSend + est - max(TSend, start of its call)): a late sender's
    receive gets all of est, a receive that came after the data none; a rendezvous sender est."""
    est = np.array([10_000.0, 10_000.0])
    m = {"s_post_start": np.array([100_000, 0]), "r_done_start": np.array([0, 50_000]),
         "r_done_call": np.array([1, 3]), "r_rank": np.array([1, 1]), "s_rank": np.array([0, 0]),
         "s_done_call": np.array([1, 2])}
    out = dmod.p2p_network(m, np.array([dmod.EAGER, dmod.RENDEZVOUS]), est, np.array([0, 4, 8]), 8)
    assert out.tolist() == [0, 0, 10_000, 0, 0, 10_000, 0, 0]


def test_cli_with_params(cases, tmp_path):
    """`mpigraph decompose RUN --params P --out DIR`: the rendezvous sender's network estimate is
    min(R, alpha_r + N beta_r) of the file's rendezvous row; the summary names the file and has
    one decomposition section; a directory of the user's files and a missing params file are
    user errors (exit 2)."""
    from mpigraph.network.params import write_params

    out, _ = cases
    params = tmp_path / "params.csv"
    alpha, beta = 20e-6, 1e-10
    write_params(str(params), [ProtocolParams("eager", 4e-6, 2e-10, 0, 0, 0, 0, 16384, "same-host"),
                               ProtocolParams("rendezvous", alpha, beta, 0, 0, 0, 0, 16384, "same-host")])
    target = tmp_path / "dec"
    for _ in range(2):      # the second run writes over the first's files
        result = mpi_env.mpigraph(["decompose", out, "--params", params, "--out", target])
        assert result.returncode == 0, result.stderr
    assert "from %s" % params in result.stdout
    assert sorted(os.listdir(target)) == sorted(["decomposition_calls.parquet", "decomposition.parquet",
                                                 "decomposition.csv", "decomposition_callsites.parquet",
                                                 "decomposition_callsites.csv", "decomposition.svg"])
    # Into the run directory (the default): its summary.txt gets one decomposition section.
    assert mpi_env.mpigraph(["decompose", out, "--params", params]).returncode == 0
    summary = (out / "summary.txt").read_text()
    assert summary.startswith("mpigraph") and summary.count("MPI time decomposition") == 1
    assert "from %s" % params in summary
    # A directory of the user's own files is refused (exit 2), and so is a missing params file.
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "summary.txt").write_text("my notes")
    refused = mpi_env.mpigraph(["decompose", out, "--out", mine])
    assert refused.returncode == 2 and "not an mpigraph run directory" in refused.stderr, refused.stderr
    assert (mine / "summary.txt").read_text() == "my notes"
    import xml.etree.ElementTree as ET
    assert ET.parse(target / "decomposition.svg").getroot().tag.endswith("svg")
    calls = {k: np.array(v) for k, v in pq.read_table(target / "decomposition_calls.parquet").to_pydict().items()}
    send = np.flatnonzero((calls["rank"] == 0) & (calls["function"] == "MPI_Send") & (calls["bytes"] == 1 << 20))
    R = calls["mpi_ns"][send] - calls["sync_ns"][send]
    assert np.array_equal(calls["network_est_ns"][send], np.minimum(R, round((alpha + beta * (1 << 20)) * 1e9)))
    bad = mpi_env.mpigraph(["decompose", out, "--params", tmp_path / "none.csv", "--out", target])
    assert bad.returncode == 2 and "mpigraph calibrate" in bad.stderr, bad.stderr


@pytest.mark.parametrize("structure", ["bsp", "halo"])
def test_identities_on_synthetic_runs(tmp_path, structure):
    """The identities and T_co <= T without MPI programs: synthetic logs (collectives, halo
    exchanges), analysed on one process."""
    from mpi4py import MPI

    import mpigraph
    from mpigraph.testing import synth

    out = tmp_path / structure
    synth.generate(str(out), 6, 60, structure)
    mpigraph.analyze(str(out), comm=MPI.COMM_SELF)
    result = dmod.decompose(str(out))
    c = {k: np.array(v) for k, v in result.calls.to_pydict().items()}
    assert np.array_equal(c["sync_ns"] + c["network_est_ns"] + c["stack_ns"], c["mpi_ns"])
    assert min(c["sync_ns"].min(), c["network_est_ns"].min(), c["stack_ns"].min()) >= 0
    ranks = pq.read_table(out / "ranks.parquet").to_pydict()
    assert np.array_equal(result.ranks["mpi_ns"], np.array(ranks["mpi_time_ns"])[np.argsort(ranks["rank"])])
    assert 0 < result.compute_only_ns <= result.run_time_ns
    assert (c["network_est_ns"] > 0).any()
