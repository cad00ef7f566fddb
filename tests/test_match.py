"""Clock alignment, matching, the receive-before-send repair and the wait metrics on hand-built runs.

Times are ns (CLOCK_MONOTONIC logs without calibration: ticks are ns), so
every expected wait below is worked out by hand in the comments.
"""

import csv
import os
import subprocess
import sys

import numpy as np
import pyarrow.parquet as pq
import pytest
from mpi4py import MPI

from mpigraph import analysis, config
from mpigraph.clock import models as clock
from mpigraph.match import link
from mpigraph.match import core as match
from mpigraph.comm import parallel
from mpigraph.trace import record
from mpigraph.trace import logs as trace
from tracebuild import part, rec, write_rank

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import mpi_env  # noqa: E402

QUIET = config.Config(quiet=True, clock="none")


# ---- clock lines --------------------------------------------------------------------------

def tree_samples(offsets, drifts, t_init=1_000_000, t_final=2_000_000_000):
    """Exact samples of a binomial ping-pong tree for true clocks c_r(t) = t + offsets[r] + drifts[r] t."""
    n = len(offsets)
    s = np.zeros(n, clock.SAMPLES_DTYPE)
    s["rank"] = np.arange(n)
    own = lambda r, t: t + offsets[r] + drifts[r] * t  # noqa: E731
    for r in range(n):
        p = r - (r & -r) if r else -1
        s["parent"][r] = p
        for end, t in (("init", t_init + 1000 * r), ("final", t_final + 1000 * r)):
            s[end]["local_ns"][r] = round(own(r, t))
            s[end]["offset_ns"][r] = round(own(r, t) - own(p, t)) if r else 0
    return s, own


def test_pingpong_lines_compose_the_tree_to_rank_0():
    offsets = [3_000_000, 50_000_000, -50_000_000, 20_000_000, -7_000_000]
    drifts = [20e-6, -100e-6, 100e-6, 60e-6, -80e-6]
    samples, own = tree_samples(offsets, drifts)
    lines = clock.pingpong_lines(samples)
    for r in range(5):
        for t in (1_000_000, 900_000_000, 2_000_000_000):     # ends and middle of the run
            local = own(r, t)
            on_rank0 = lines.to_global(r, np.array([round(local)]))[0]
            assert abs(on_rank0 - own(0, t)) <= 2, (r, t)     # ns: rounding only


def test_barrier_lines_median_of_exit_differences():
    s = np.zeros(2, clock.SAMPLES_DTYPE)
    s["rank"] = [0, 1]
    for end, base in (("init", 1_000_000), ("final", 1_001_000_000)):
        exits0 = base + np.arange(8) * 10_000
        s[end]["barrier_ns"][0, :, 0] = exits0 - 2000
        s[end]["barrier_ns"][0, :, 1] = exits0
        shift = 5_000_000 if end == "init" else 5_100_000          # rank 1: 5 ms ahead, +100 ppm
        noise = np.array([0, 300, -300, 100, -100, 7000, 0, 0])   # one outlier: the median ignores it
        s[end]["barrier_ns"][1, :, 1] = exits0 + shift + noise
        s[end]["barrier_ns"][1, :, 0] = exits0 + shift - 2000
    lines = clock.barrier_lines(s)
    assert lines.offset[1] == pytest.approx(5_000_000, abs=100)
    assert lines.drift[1] * 1e6 == pytest.approx(100, abs=0.5)


# ---- a hand-built two-rank run ---------------------------------------------------------------

def rank0_rows(unreceived=False, late_irecv=False):
    waitall = rec("MPI_Waitall", 2200, 5000)
    rows = [
        rec("MPI_Init", 0, 100),                                                    # call 0
        rec("MPI_Send", 1000, 1100, record.SEND, peer=1, tag=5, bytes=8),          # call 1
        rec("MPI_Isend", 2000, 2050, record.SEND, peer=1, tag=6, bytes=8, request=1),  # call 2
        rec("MPI_Irecv", 2100, 2150, record.RECV, peer=record.PEER_ANY, tag=record.TAG_ANY, bytes=64,
            request=2),                                                             # call 3
        waitall,                                                                    # call 4
        part(waitall, record.SEND, peer=1, tag=6, bytes=8, request=1),
        part(waitall, record.RECV, peer=1, tag=9, bytes=16, request=2),            # the wildcard, resolved
        rec("MPI_Allreduce", 6000, 9000, bytes=8, seq=1),                          # call 5
    ]
    if unreceived:
        rows.append(rec("MPI_Send", 9100, 9200, record.SEND, peer=1, tag=77, bytes=4))
    rows.append(rec("MPI_Finalize", 10000, 10000))
    return rows


def rank1_rows(recv_end=1200):
    return [
        rec("MPI_Init", 0, 100),                                                    # call 0
        rec("MPI_Recv", 500, recv_end, record.RECV, peer=0, tag=5, bytes=8),       # call 1
        rec("MPI_Send", 4000, 4100, record.SEND, peer=0, tag=9, bytes=16),         # call 2
        rec("MPI_Recv", 2500, 2600, record.RECV, peer=0, tag=6, bytes=8),          # call 3
        rec("MPI_Allreduce", 8000, 9100, bytes=8, seq=1),                          # call 4
        rec("MPI_Finalize", 10000, 10000),                                          # call 5
    ]


def write_two(run_dir, **kw):
    recv_end = kw.pop("recv_end", 1200)
    write_rank(run_dir, 0, 2, rank0_rows(**kw))
    write_rank(run_dir, 1, 2, rank1_rows(recv_end))
    return run_dir


def linked_run(run_dir, method="none"):
    comm = MPI.COMM_WORLD
    run = trace.open_run(str(run_dir))
    calls, info = link.aligned_calls(comm, run.logs, method)
    return link.link(comm, parallel.Ownership(2, 1), calls, 2, info)


def test_record_times_give_each_record_its_calls_times(tmp_path):
    """A part record has its call's times; a log without part records gets its calls' own
    arrays back, read-only, not a copy per record."""
    linked = linked_run(write_two(tmp_path))
    with_parts, without_parts = linked.calls[0], linked.calls[1]
    start, end = with_parts.record_times()
    assert len(start) == len(with_parts.record_call) == with_parts.n_calls + 2
    assert start[4] == start[5] == start[6] == with_parts.start_ns[4] and end[6] == with_parts.end_ns[4]
    start, end = without_parts.record_times()
    assert np.shares_memory(start, without_parts.start_ns) and np.shares_memory(end, without_parts.end_ns)
    assert np.array_equal(start, without_parts.start_ns) and np.array_equal(end, without_parts.end_ns)
    with pytest.raises(ValueError):
        start[0] = 0            # the calls' times, which the graph still reads


def edge_set(deps):
    return {(int(a), int(b), int(c), int(d), match.KIND_NAMES[k]) for a, b, c, d, k in
            zip(deps.src_rank, deps.src_call, deps.dst_rank, deps.dst_call, deps.kind)}


def test_dependencies_of_the_hand_built_run(tmp_path):
    linked = linked_run(write_two(tmp_path))
    # From the run's start, the end of the earliest MPI_Init (at 100 ns): Init itself starts before 0.
    assert linked.calls[0].start_ns.tolist() == [-100, 900, 1900, 2000, 2100, 5900, 9900]
    assert edge_set(linked.dependencies) == {
        (0, 1, 1, 1, "message_late_sender"),      # Send tag 5 -> Recv
        (0, 2, 1, 3, "message_late_sender"),      # Isend tag 6 -> Recv tag 6 (rank 1's log order differs)
        (1, 2, 0, 4, "message_late_sender"),      # Send tag 9 -> the Waitall that completed the wildcard Irecv
        (1, 1, 0, 1, "message_late_receiver"),    # Recv posted at 500, before the Send ended at 1100
        (1, 3, 0, 4, "message_late_receiver"),    # Recv posted at 2500 <= Waitall end 5000
        (0, 3, 1, 2, "message_late_receiver"),    # Irecv posted at 2100 <= Send end 4100
        (1, 4, 0, 5, "collective_n_to_n"),        # rank 1 arrived last at the Allreduce
        (1, 4, 1, 4, "collective_n_to_n"),        # and releases itself: the graph sees every member
    }
    assert all((linked.dependencies.src_vertex == match.VERTEX_START).tolist())
    assert len(linked.unmatched["rank"]) == 0 and linked.repair.found == 0


def test_picked_dependencies_are_the_parts_masked_rows_in_order():
    rng = np.random.default_rng(7)
    n = 1000
    masks = [rng.random(n) < 0.5, np.zeros(n, bool), np.ones(n, bool)]
    ranks32 = rng.integers(0, 64, n).astype(np.int32)
    ranks64 = rng.integers(0, 64, n)                            # not the column's dtype: cast
    calls = rng.integers(0, 10**12, n)
    kinds = rng.integers(0, 6, n).astype(np.int8)
    parts = [(masks[0], ranks32, calls, ranks64, calls + 1, kinds),
             (masks[1], ranks32, calls, ranks32, calls, match.MESSAGE_LATE_SENDER),
             (masks[2], ranks64, calls + 2, ranks32, calls + 3, match.COLLECTIVE_N_TO_N)]
    deps = match.Dependencies.picked(parts)

    def want(i, value):
        return np.broadcast_to(value, n)[masks[i]]

    expect = {name: np.concatenate([want(i, part[1 + j]) for i, part in enumerate(parts)])
              for j, name in enumerate(("src_rank", "src_call", "dst_rank", "dst_call", "kind"))}
    assert len(deps) == masks[0].sum() + n
    for name, column in expect.items():
        assert getattr(deps, name).dtype == match.EDGE_DTYPES[name]
        assert getattr(deps, name).tolist() == column.tolist(), name
    assert (deps.src_vertex == match.VERTEX_START).all()
    assert len(match.Dependencies.empty()) == 0


def test_waits_of_the_hand_built_run(tmp_path):
    linked = linked_run(write_two(tmp_path))
    w0, w1 = linked.waits[0], linked.waits[1]
    # Rank 1's first Recv began at 500, the send at 1000: 500 ns late sender.
    assert (w1["wait_before"][1], w1["wait_state"][1]) == (500, 0)
    # Rank 0's Waitall (2200-5000) waited for the tag-9 send at 4000 (1800) and for the tag-6
    # receive posted at 2500 (late receiver 300): the larger, late sender, is its wait.
    assert (w0["wait_before"][4], w0["wait_state"][4], w0["execution"][4]) == (1800, 0, 2800 - 1800)
    # Allreduce: starts 6000 / 8000, ends 9000 / 9100.
    assert (w0["wait_before"][5], w0["wait_after"][5], w0["execution"][5]) == (2000, 0, 1000)
    assert (w1["wait_before"][4], w1["wait_after"][4], w1["execution"][4]) == (0, 100, 1000)
    assert w0["wait_state"][5] == 2 and w0["wait_state_time"][5] == 2000       # wait_nxn
    assert w1["wait_state"][4] == -1


def test_waits_packed_for_the_path_stage_come_back_the_same(tmp_path):
    waits = linked_run(write_two(tmp_path)).waits
    before = {rank: {name: column.copy() for name, column in waits[rank].items()} for rank in waits}
    waits.pack()
    assert waits._columns is None           # held encoded, not as well as the columns
    assert sorted(waits) == [0, 1] and len(waits) == 2
    for rank, columns in before.items():
        got = waits[rank]
        for name, column in columns.items():
            assert got[name].dtype == column.dtype and got[name].tolist() == column.tolist(), (rank, name)
    with pytest.raises(KeyError):
        waits[2]


class _Comm:
    def __init__(self, rank, size):
        self.rank, self.size = rank, size


@pytest.mark.parametrize("algorithm, rank, size, packed", [
    ("dijkstra", 0, 2, True), ("delta-stepping", 0, 4, True), ("toposort", 0, 2, True),
    ("dijkstra", 1, 2, False),                 # only rank 0 holds the gathered graph
    ("dijkstra", 0, 1, False),                 # one rank: its own graph, as the parallel ones build it
    ("parallel-dijkstra", 0, 2, False), ("parallel-delta-stepping", 0, 2, False),
    ("parallel-toposort", 0, 2, False)])
def test_waits_are_packed_only_where_the_path_stage_gathers(algorithm, rank, size, packed):
    assert analysis.waits_packed_for_path(algorithm, _Comm(rank, size)) is packed


def test_waits_not_packed_for_the_path_stage_stay_as_they_are(tmp_path):
    waits = linked_run(write_two(tmp_path)).waits
    waits.pack_for_path = False
    waits.before_path()
    assert waits._columns is not None and waits._packed is None
    waits.pack_for_path = True
    waits.before_path()
    assert waits._columns is None and waits._packed is not None


@pytest.mark.parametrize("offsets", [None, [0, 40_000, -30_000, 25_000, 0, -45_000]])
def test_the_sources_starts_given_with_the_edges_are_their_calls_starts(tmp_path, offsets):
    """The path stage takes each edge's source start from the match (Dependencies.src_start)
    for every source that is a call's start, this rank's own too: it must be that call's start
    as the graph has it, after the clocks' repair (offsets and no clock alignment: receives
    before their sends, repaired)."""
    from mpigraph.testing import synth

    synth.generate(tmp_path, 6, 60, "halo", clock_offsets_ns=offsets)
    run = trace.open_run(str(tmp_path))
    calls, info = link.aligned_calls(MPI.COMM_WORLD, run.logs, "none")
    linked = link.link(MPI.COMM_WORLD, parallel.Ownership(6, 1), calls, 6, info)
    if offsets is not None:
        assert linked.repair.found > 0
    deps = linked.dependencies
    start = deps.src_vertex == 0
    assert start.sum() > 100
    for rank in np.unique(deps.src_rank[start]):
        mine = start & (deps.src_rank == rank)
        assert (deps.src_start[mine] == linked.calls[int(rank)].start_ns[deps.src_call[mine]]).all(), rank


def test_report_files_of_the_hand_built_run(tmp_path):
    run_dir = write_two(tmp_path)
    analysis.analyze(str(run_dir), MPI.COMM_WORLD, QUIET)
    calls = pq.read_table(run_dir / "calls.parquet").to_pydict()
    assert calls["rank"] == [0] * 7 + [1] * 6 and calls["call"] == list(range(7)) + list(range(6))
    assert calls["wait_before_ns"][4] == 1800 and calls["wait_state"][4] == "late_sender"
    # The path (tests/test_paths_report.py checks the rule): rank 0's Send released rank 1's
    # Recv, and both sit between the run's two busy stretches.
    path = pq.read_table(run_dir / "critical_path.parquet").to_pydict()
    assert "message" in path["kind"]
    assert any(calls["on_path"]) and not all(calls["on_path"])
    inst = pq.read_table(run_dir / "collectives.parquet").to_pydict()
    assert inst["function"] == ["MPI_Allreduce"] and inst["members"] == [2] and inst["last_rank"] == [1]
    # Allreduce 6000-9000 and 8000-9100: rank 0 waits 2000 before, rank 1 100 after, of 3000 + 1100;
    # the seed's columns keep its formula, 2100 / (2 members * (9000 - 8000)), over 100%.
    assert inst["wait_total_ns"] == [2100] and inst["time_total_ns"] == [4100]
    assert inst["imbalance"] == [pytest.approx(2100 / 4100)] and inst["execution_ns"] == [2000]
    assert inst["seed_wait_total_ns"] == [2100] and inst["seed_imbalance"] == [pytest.approx(2100 / 2000)]
    with open(run_dir / "waitstates.csv") as f:
        rows = {(r["rank"], r["function"], r["kind"]): r["time_s"] for r in csv.DictReader(f)}
    # The Waitall's 1800 ns, charged per message by the airport rule (metrics.message_kinds): the
    # send waited 300 for its late receiver and the receive 1800 for its late sender; the first
    # 300 are shared by both (150 each), the other 1500 are the receive's alone.
    assert rows[("0", "MPI_Waitall", "late_sender")] == "0.000001650"
    assert rows[("0", "MPI_Waitall", "late_receiver")] == "0.000000150"
    assert rows[("1", "MPI_Recv", "late_sender")] == "0.000000500"
    assert rows[("0", "MPI_Allreduce", "wait_nxn")] == "0.000002000"
    with open(run_dir / "ranks.csv") as f:
        ranks = list(csv.DictReader(f))
    # Rank 0: waits 1800 + 2000; execution 100+50+50+1000+1000 (+ Send 100); compute: gaps between calls.
    assert ranks[0]["wait_s"] == "0.000003800"
    assert len((run_dir / "unmatched.csv").read_text().splitlines()) == 1     # header only
    text = (run_dir / "summary.txt").read_text()
    assert "Unmatched operations: none" in text and "violations found 0" in text


def test_an_unreceived_message_is_listed(tmp_path):
    run_dir = write_two(tmp_path, unreceived=True)
    analysis.analyze(str(run_dir), MPI.COMM_WORLD, QUIET)
    with open(run_dir / "unmatched.csv") as f:
        rows = list(csv.DictReader(f))
    assert [(r["rank"], r["what"], r["function"], r["peer"], r["tag"], r["reason"]) for r in rows] == [
        ("0", "send", "MPI_Send", "1", "77", "no matching receive")]
    assert "Unmatched operations: 1" in (run_dir / "summary.txt").read_text()


def analyze_serially_and_in_parallel(serial, par, n):
    """`mpigraph analyze` of run serial on one analysis rank and of run par on n."""
    env = mpi_env.base_env({"MPIGRAPH_CLOCK": "none"})
    for d, cmd in ((serial, []), (par, [mpi_env.wheel_mpi().mpiexec, "-n", str(n)])):
        cmd += [sys.executable, "-m", "mpigraph", "analyze", str(d), "--quiet"]
        result = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=mpi_env.NEUTRAL_CWD)
        assert result.returncode == 0, result.stderr


def test_an_unreceived_message_is_listed_by_the_receivers_analysis_rank(tmp_path):
    """On 2 analysis ranks the send travels to the receiver's owner, which finds it unmatched:
    the same unmatched.csv as one analysis rank writes."""
    serial, par = write_two(tmp_path / "serial", unreceived=True), write_two(tmp_path / "par", unreceived=True)
    analyze_serially_and_in_parallel(serial, par, 2)
    text = (par / "unmatched.csv").read_text()
    assert text == (serial / "unmatched.csv").read_text() and len(text.splitlines()) == 2
    assert text.splitlines()[1].startswith("0,send,no matching receive,MPI_Send,")


def test_a_receive_before_its_send_is_repaired(tmp_path):
    # Rank 1's first Recv ends at 900, before the Send began at 1000: a clock error of 100+ ns.
    linked = linked_run(write_two(tmp_path, recv_end=900))
    assert (linked.repair.found, linked.repair.repaired, linked.repair.remaining) == (1, 1, 0)
    c1 = linked.calls[1]                                  # times from the end of MPI_Init (100 ns)
    assert c1.end_ns[1] == 900                            # moved to the send's start
    assert c1.start_ns[2] == 4000 and c1.end_ns[4] == 9100  # and everything after it by 100
    assert linked.repair.shift_ns[1] == 100


def test_a_repair_that_makes_a_later_send_late_is_repaired_in_the_same_round(tmp_path):
    # Rank 1's Recv ends at 900, before rank 0's Send began at 1000: rank 1 moves by 100, and so
    # does its Send to rank 2 (950 -> 1050), now after rank 2's Recv ended (1000): rank 2 moves by 50,
    # in a second pass of the same round (the chain is followed without matching again).
    write_rank(tmp_path, 0, 3, [rec("MPI_Init", 0, 100),
                                rec("MPI_Send", 1000, 1100, record.SEND, peer=1, tag=1, bytes=8),
                                rec("MPI_Finalize", 5000, 5000)])
    write_rank(tmp_path, 1, 3, [rec("MPI_Init", 0, 100),
                                rec("MPI_Recv", 500, 900, record.RECV, peer=0, tag=1, bytes=8),
                                rec("MPI_Send", 950, 960, record.SEND, peer=2, tag=2, bytes=8),
                                rec("MPI_Finalize", 5000, 5000)])
    write_rank(tmp_path, 2, 3, [rec("MPI_Init", 0, 100),
                                rec("MPI_Recv", 400, 1000, record.RECV, peer=1, tag=2, bytes=8),
                                rec("MPI_Finalize", 5000, 5000)])
    comm = MPI.COMM_WORLD
    calls, info = link.aligned_calls(comm, trace.open_run(str(tmp_path)).logs, "none")
    linked = link.link(comm, parallel.Ownership(3, 1), calls, 3, info)
    repair = linked.repair
    assert (repair.found, repair.repaired, repair.remaining, repair.rounds) == (1, 2, 0, 1)
    assert repair.shift_ns == {1: 100, 2: 50}
    assert linked.calls[1].start_ns[2] == 950                # 1050 from the origin at 100 ns
    assert linked.calls[2].end_ns[1] == 950 and linked.calls[2].end_ns[2] == 4950


def test_a_repair_moves_the_collectives_after_it(tmp_path):
    # Rank 1's Recv ends at 900, before rank 0's Send began at 1000: rank 1 moves by 100, its
    # Barrier too (start 3000 -> 3100, end 4000 -> 4100). The instance is grouped once, before
    # the repair, and its times are taken again after it: rank 1 arrives last at 3100 (3000 from
    # the origin at 100 ns), and the Barrier's members leave at 4000 and 4100.
    write_rank(tmp_path, 0, 2, [rec("MPI_Init", 0, 100),
                                rec("MPI_Send", 1000, 1100, record.SEND, peer=1, tag=1, bytes=8),
                                rec("MPI_Barrier", 2000, 4000, seq=1),
                                rec("MPI_Finalize", 5000, 5000)])
    write_rank(tmp_path, 1, 2, [rec("MPI_Init", 0, 100),
                                rec("MPI_Recv", 500, 900, record.RECV, peer=0, tag=1, bytes=8),
                                rec("MPI_Barrier", 3000, 4000, seq=1),
                                rec("MPI_Finalize", 5000, 5000)])
    comm = MPI.COMM_WORLD
    calls, info = link.aligned_calls(comm, trace.open_run(str(tmp_path)).logs, "none")
    linked = link.link(comm, parallel.Ownership(2, 1), calls, 2, info)
    assert linked.repair.shift_ns == {1: 100}
    assert linked.instances["max_start"].tolist() == [3000] and linked.instances["min_end"].tolist() == [3900]
    assert linked.waits[0]["wait_before"][2] == 3000 - 1900       # rank 0 waits for rank 1's arrival


def test_sends_and_receives_with_mpi_proc_null_are_no_messages(tmp_path):
    # MPI_PROC_NULL moves no message: rank 0's Send and rank 1's Recv to and from it are neither
    # matched nor unmatched, and only the real message (tag 1) makes edges.
    write_rank(tmp_path, 0, 2, [rec("MPI_Init", 0, 100),
                                rec("MPI_Send", 1000, 1100, record.SEND, peer=record.PEER_PROC_NULL, tag=7),
                                rec("MPI_Send", 1200, 1300, record.SEND, peer=1, tag=1, bytes=8),
                                rec("MPI_Finalize", 5000, 5000)])
    write_rank(tmp_path, 1, 2, [rec("MPI_Init", 0, 100),
                                rec("MPI_Recv", 500, 600, record.RECV, peer=record.PEER_PROC_NULL, tag=7),
                                rec("MPI_Recv", 700, 1400, record.RECV, peer=0, tag=1, bytes=8),
                                rec("MPI_Finalize", 5000, 5000)])
    comm = MPI.COMM_WORLD
    calls, info = link.aligned_calls(comm, trace.open_run(str(tmp_path)).logs, "none")
    linked = link.link(comm, parallel.Ownership(2, 1), calls, 2, info)
    assert len(linked.unmatched["rank"]) == 0
    assert edge_set(linked.dependencies) == {(0, 2, 1, 2, "message_late_sender"),
                                             (1, 2, 0, 2, "message_late_receiver")}   # posted at 700 <= 1300


def test_matching_is_the_same_on_several_analysis_ranks(tmp_path):
    serial, par = write_ring(tmp_path / "serial"), write_ring(tmp_path / "parallel")
    analyze_serially_and_in_parallel(serial, par, 3)
    for name in ("calls.parquet", "collectives.parquet", "waitstates.parquet"):
        assert pq.read_table(par / name).equals(pq.read_table(serial / name)), name
    assert (par / "unmatched.csv").read_text() == (serial / "unmatched.csv").read_text()
    calls = pq.read_table(serial / "calls.parquet").to_pydict()
    waitall = [i for i, f in enumerate(calls["function"]) if f == "MPI_Waitall"]
    # Rank r's Waitall starts at 1000 r + 3000; its left neighbour's Isend at 1000 (r - 1) + 1000:
    # never late except for rank 0, whose neighbour (rank 4) sends at 5000.
    assert [calls["wait_before_ns"][i] for i in waitall] == [2000, 0, 0, 0, 0]


def write_ring(run_dir, n=5):
    for r in range(n):
        t = 1000 * r
        wait = rec("MPI_Waitall", t + 3000, t + 9000)
        write_rank(run_dir, r, n, [
            rec("MPI_Init", t, t + 200),
            rec("MPI_Isend", t + 1000, t + 1100, record.SEND, peer=(r + 1) % n, tag=3, bytes=8, request=1),
            rec("MPI_Irecv", t + 1200, t + 1250, record.RECV, peer=record.PEER_ANY, tag=3, bytes=8, request=2),
            wait, part(wait, record.SEND, peer=(r + 1) % n, tag=3, bytes=8, request=1),
            part(wait, record.RECV, peer=(r - 1) % n, tag=3, bytes=8, request=2),
            rec("MPI_Allreduce", t + 10000, 20000, bytes=8, seq=1),
            rec("MPI_Finalize", 21000, 21000),
        ])
    return run_dir


# ---- the vectorised building blocks against plain Python ---------------------------------------

def random_key_columns(rng, n):
    """Key columns like the matcher's: small ints, huge communicator ids, int64 extremes."""
    return [rng.integers(0, 5, n), (rng.integers(0, 3, n) << 33) | rng.integers(0, 3, n),
            rng.integers(-3, 3, n) * (1 << 40), rng.choice([np.iinfo(np.int64).min, 0, np.iinfo(np.int64).max], n)]


@pytest.mark.parametrize("seed", range(5))
def test_sort_rows_is_lexsort(seed):
    rng = np.random.default_rng(seed)
    cols = random_key_columns(rng, 500)
    assert np.array_equal(match.sort_rows(cols), np.lexsort(cols[::-1]))
    key = match.packed_key(cols)
    rows = list(zip(*[c.tolist() for c in cols]))
    for i, j in zip(rng.integers(0, 500, 2000), rng.integers(0, 500, 2000)):   # same order, same equality
        assert (key[i] < key[j]) == (rows[i] < rows[j]) and (key[i] == key[j]) == (rows[i] == rows[j])


def test_sort_rows_falls_back_to_lexsort_beyond_63_bits():
    rng = np.random.default_rng(7)
    cols = [rng.integers(0, 1 << 40, 3000) for _ in range(8)]    # 8 x 12 bits even as dense ranks
    assert match.packed_key(cols) is None
    assert np.array_equal(match.sort_rows(cols), np.lexsort(cols[::-1]))


@pytest.mark.parametrize("seed", range(4))
def test_pair_occurrences_is_pair_by_key_of_ordinals(seed):
    """The k-th occurrence of a value in a paired with its k-th in b: request posts and completions."""
    rng = np.random.default_rng(seed)
    a, b = rng.integers(-3, 20, 500) * (1 << 40), rng.integers(-3, 20, 400) * (1 << 40)
    want = match.pair_by_key([a, match.ordinal_within([a], np.arange(len(a)))],
                             [b, match.ordinal_within([b], np.arange(len(b)))])
    got = match.pair_occurrences(a, b)
    assert all(np.array_equal(g, w) for g, w in zip(got, want))
    assert all(len(x) == 0 for x in match.pair_occurrences(a[:0], b))


@pytest.mark.parametrize("seed", range(3))
def test_pair_occurrences_of_alike_sides_pairs_the_kth_with_the_kth(seed):
    """Every post with its completion (both sides' values alike, in other orders): paired without a search."""
    rng = np.random.default_rng(seed)
    a = rng.integers(0, 30, 2000)
    b = rng.permutation(a)
    want = match.pair_by_key([a, match.ordinal_within([a], np.arange(len(a)))],
                             [b, match.ordinal_within([b], np.arange(len(b)))])
    got = match.pair_occurrences(a, b)
    assert all(np.array_equal(g, w) for g, w in zip(got, want)) and len(got[0]) == len(a)


def test_pair_by_key_of_alike_sides_pairs_every_row_and_keeps_duplicates_as_the_search_does():
    keys = [np.array([3, 1, 2, 0]), np.array([0, 0, 1, 1])]
    ia, ib = match.pair_by_key(keys, [k[::-1] for k in keys])
    assert ia.tolist() == [3, 1, 2, 0] and ib.tolist() == [0, 2, 1, 3]
    # Equal keys on both sides (unresolved receives' ordinal -1 would be): each finds the first
    dup = [np.array([5, 5]), np.array([-1, -1])]
    ia, ib = match.pair_by_key(dup, dup)
    assert ia.tolist() == [0, 1] and ib.tolist() == [0, 0]


def test_ordinal_within_groups_in_order_in_several_runs():
    """Rank after rank, each rank's groups its own and in order (the operations' streams): the
    one sort by group is the whole sort; a group whose rows are out of order is sorted by order."""
    rng = np.random.default_rng(5)
    # Each rank's records counted from a later start than the next rank's: four runs, distinct
    per_rank = [np.sort(rng.permutation(1000)[:600]) + 1000 * (3 - r) for r in range(4)]
    order = np.concatenate(per_rank)
    keys = [np.repeat(np.arange(4), 600), rng.integers(0, 7, len(order))]
    for k in (keys, [keys[1]]):           # groups within a rank, or across the ranks' runs
        rows = list(zip(*[c.tolist() for c in k]))
        seen, expected = {}, np.empty(len(order), np.int64)
        for i in np.argsort(order):
            expected[i] = seen.get(rows[i], 0)
            seen[rows[i]] = expected[i] + 1
        assert np.array_equal(match.ordinal_within(k, order), expected)


@pytest.mark.parametrize("wide", [False, True])
def test_ordinal_within_and_pair_by_key_match_python(wide):
    rng = np.random.default_rng(3)
    n = 3000
    keys = [rng.integers(0, 4, n), rng.integers(0, 1 << 40, n) if wide else rng.integers(0, 3, n)] \
        + ([rng.integers(0, 1 << 40, n) for _ in range(6)] if wide else [])
    order = rng.permutation(n)
    got = match.ordinal_within(keys, order)
    rows = list(zip(*[k.tolist() for k in keys]))
    seen = {}
    expected = np.empty(n, np.int64)
    for i in np.argsort(order):
        expected[i] = seen.get(rows[i], 0)
        seen[rows[i]] = expected[i] + 1
    assert np.array_equal(got, expected)

    a_keys = keys + [got]
    b_pick = rng.permutation(n)[: n // 2]
    b_keys = [k[b_pick] for k in a_keys]
    ia, ib = match.pair_by_key(a_keys, b_keys)
    assert sorted(zip(ia.tolist(), ib.tolist())) == sorted(zip(b_pick.tolist(), range(len(b_pick))))


@pytest.mark.parametrize("runs", [1, 3, 3000])
def test_ordinal_within_counts_in_order_given_in_runs(runs):
    """`order` in a few increasing runs (posts in log order, rank after rank: sorted by it, then
    by group) or in many (one sort of both): each row's place among its group's, in order."""
    rng = np.random.default_rng(runs)
    n = 3000
    keys = [rng.integers(0, 3, n), rng.integers(0, 5, n)]
    cuts = np.sort(rng.choice(np.arange(1, n), runs - 1, replace=False))
    order = np.concatenate([np.sort(part) for part in np.split(rng.permutation(n), cuts)])
    rows = list(zip(*[k.tolist() for k in keys]))
    seen, expected = {}, np.empty(n, np.int64)
    for i in np.argsort(order):
        expected[i] = seen.get(rows[i], 0)
        seen[rows[i]] = expected[i] + 1
    assert np.array_equal(match.ordinal_within(keys, order), expected)


@pytest.mark.parametrize("groups", [3, 70_000])
def test_ordinal_within_counts_in_order_with_few_or_many_groups(groups):
    """In a few runs of `order`, groups are numbered and sorted as 16-bit codes where there are at
    most 65,536 of them (a radix sort), as int64 codes where there are more: the same places."""
    rng = np.random.default_rng(groups)
    n = 200_000
    keys = [rng.integers(0, groups, n) * 1000 + 7]
    order = np.concatenate([np.sort(part) for part in np.split(rng.permutation(n), [70_000, 150_000])])
    expected, seen = np.empty(n, np.int64), {}
    for i, g in zip(np.argsort(order).tolist(), keys[0][np.argsort(order)].tolist()):
        expected[i] = seen.get(g, 0)
        seen[g] = expected[i] + 1
    assert (len(seen) > 1 << 16) == (groups > 1 << 16)      # both sides of the 16-bit limit
    assert np.array_equal(match.ordinal_within(keys, order), expected)


def test_group_instances_releases_like_the_rules_say():
    """The releasing member of every member, against a plain Python reading of the rules
    (ties in start time: the last of them in rank order is the last arriver)."""
    from mpigraph.match import collectives
    from mpigraph.trace import functions as mf

    rng = np.random.default_rng(11)
    funcs = [mf.BY_NAME[name].id for name in ("MPI_Allreduce", "MPI_Bcast", "MPI_Reduce", "MPI_Scan")]
    rows = {name: [] for name in collectives.MEMBER_DTYPES}
    for seq in range(1, 60):
        comm = int(rng.choice([0, (5 << 32) | 2]))
        size = int(rng.integers(1, 7))
        func, root = int(rng.choice(funcs)), int(rng.integers(0, size))
        for rank in rng.permutation(size):            # rows arrive in any order
            start = int(rng.integers(0, 4)) * 100       # few values: many ties
            end = start + int(rng.integers(0, 3)) * 100       # before, at or after the root's start
            comm_rank = rank if comm == 0 else size - 1 - rank      # a communicator that reverses them
            call = 2 * seq + (comm != 0)
            # now and then a nonblocking one's Wait, or none (never completed)
            done_call = int(rng.choice([call, call + 1, -1], p=[0.7, 0.2, 0.1]))
            for name, value in (("comm", comm), ("seq", seq), ("rank", rank), ("comm_rank", comm_rank),
                                ("comm_size", size), ("call", call), ("func", func), ("root", root),
                                ("start", start), ("end", end), ("done_call", done_call)):
                rows[name].append(value)
    rows = {name: np.array(v, dtype) for (name, v), dtype in zip(rows.items(), collectives.MEMBER_DTYPES.values())}
    _, m = collectives.group_instances(rows)

    def last_arriver(members):
        best = max(s for _, s in members)
        return [r for r, s in members if s == best][-1]

    for i in range(len(m["rank"])):
        same = m["call"] == m["call"][i]                  # the call number names the instance here
        members = sorted(zip(m["rank"][same].tolist(), m["start"][same].tolist()))
        by_comm_rank = sorted(zip(m["comm_rank"][same].tolist(), m["rank"][same].tolist(), m["start"][same].tolist()))
        rank, func, root = int(m["rank"][i]), int(m["func"][i]), int(m["root"][i])
        name = mf.BY_ID[func].name
        start_of = dict(members)
        completed, end = m["done_call"][i] >= 0, m["end"][i]       # end: of its own call or its Wait
        latest = max(start_of.values())
        if func == funcs[0] or (func == funcs[2] and rank == root):
            release = last_arriver(members)
        elif func in funcs[1:3]:
            if func == funcs[1] and rank != root:
                release = root
            else:       # a Reduce's non-root: the root, where it held the member in its completing call
                release = root if func == funcs[2] and completed and end >= start_of[root] else -1
            release = -1 if release == rank else release
            # A Bcast's or Reduce's member its MPI held until the last arrival came waited for it.
            last = last_arriver(members)
            if completed and end >= latest and last != rank and (release < 0 or start_of[release] < latest):
                release = last
        elif func == funcs[3]:      # the ranks before it in the communicator, last among equals in that order
            earlier = [(r, s) for c, r, s in by_comm_rank if c < int(m["comm_rank"][i])]
            release = last_arriver(earlier) if earlier else -1
            # ... or the last of all, where it held the member in its completing call
            last = last_arriver([(r, s) for _, r, s in by_comm_rank])
            if completed and end >= latest and last != rank and (release < 0 or dict(members)[release] < latest):
                release = last
        else:
            release = -1
        release = -1 if release == rank else release
        assert m["release_rank"][i] == release, (name, members, rank)


def _random_members(rng, n_instances=300):
    """Member rows (owned-rank order) of random instances: ties in start and end, missing members."""
    from mpigraph.match import collectives
    from mpigraph.trace import functions as mf

    funcs = [mf.BY_NAME[name].id for name in ("MPI_Allreduce", "MPI_Bcast", "MPI_Reduce", "MPI_Scan", "MPI_Barrier")]
    rows = {name: [] for name in collectives.MEMBER_DTYPES}
    for seq in range(1, n_instances):
        comm = int(rng.choice([0, (5 << 32) | 2]))
        size = int(rng.integers(1, 9))
        func, root = int(rng.choice(funcs)), int(rng.integers(0, size))
        for rank in rng.permutation(size):
            if rng.random() < 0.1:
                continue
            comm_rank = rank if comm == 0 else size - 1 - rank      # a communicator that reverses them
            for name, value in (("comm", comm), ("seq", seq), ("rank", rank), ("comm_rank", comm_rank),
                                ("comm_size", size), ("call", 2 * seq + (comm != 0)), ("func", func), ("root", root),
                                ("start", int(rng.integers(0, 4)) * 100), ("end", int(rng.integers(0, 5)) * 100),
                                ("done_call", 2 * seq + (comm != 0) + int(rng.random() < 0.2))):   # a Wait
                rows[name].append(value)
    rows = {name: np.array(v, dtype) for (name, v), dtype in zip(rows.items(), collectives.MEMBER_DTYPES.values())}
    order = np.argsort(rows["rank"], kind="stable")
    return {name: col[order] for name, col in rows.items()}


def test_local_groups_order_is_group_instances_order():
    """_local_groups sorts by the instance alone when the rows come in rank order; a rank twice in
    an instance (comm ranks out of order) or rows out of rank order take the full sort."""
    from mpigraph.match import collectives as c

    rows = _random_members(np.random.default_rng(0))
    twice = {name: np.concatenate([col, col[:5]]) for name, col in rows.items()}
    twice["comm_rank"][-5:] -= 1
    twice = {name: col[np.argsort(twice["rank"], kind="stable")] for name, col in twice.items()}
    shuffled = {name: col[::-1] for name, col in rows.items()}
    for r in (rows, twice, shuffled):
        want = match.sort_rows([match.group_key([r["comm"], r["seq"]]), r["rank"], r["comm_rank"]])
        assert np.array_equal(c._local_groups(r)[0], want)


@pytest.mark.parametrize("seed", range(4))
def test_local_groups_of_parts_equal_of_the_whole_table(seed):
    """LocalGroups.of_parts (members placed by counting, rank by rank) gives LocalGroups.of's
    groups of the same rows as one table, column for column and dtype for dtype: with keys it
    can count, with a rank twice in an instance and with keys too sparse to count (both: of)."""
    from mpigraph.match import collectives as c

    rows = _random_members(np.random.default_rng(seed))
    twice = {name: np.concatenate([col, col[:5]]) for name, col in rows.items()}
    twice["comm_rank"][-5:] -= 1
    twice = {name: col[np.argsort(twice["rank"], kind="stable")] for name, col in twice.items()}
    sparse = dict(rows, seq=(rows["seq"].astype(np.int64) * 100_000).astype(np.uint32))
    for r in (rows, twice, sparse):
        parts = [{name: col[r["rank"] == rank] for name, col in r.items()} for rank in np.unique(r["rank"])]
        want, got = c.LocalGroups.of(r), c.LocalGroups.of_parts(parts)
        for field in ("members", "instance"):
            for name, col in getattr(want, field).items():
                assert np.array_equal(getattr(got, field)[name], col), (field, name)
                assert getattr(got, field)[name].dtype == col.dtype, (field, name)
        assert np.array_equal(got.start_idx, want.start_idx) and np.array_equal(got.group, want.group)
    assert c._placed_by_instance([{name: col[rows["rank"] == 0] for name, col in rows.items()}]) is not None
    assert c._placed_by_instance([{name: col[twice["rank"] == 0] for name, col in twice.items()}]) is None


@pytest.mark.parametrize("seed", range(8))
def test_collective_partials_give_group_instances_answer(seed):
    """match_collectives moves one partial row per instance and analysis rank, not the members:
    over any split of the ranks into contiguous blocks its answer is group_instances' on all rows
    (the scan members travel themselves: their order is the communicator's)."""
    from mpigraph.match import collectives as c

    rows = _random_members(np.random.default_rng(seed))
    want_instances, want = c.group_instances(rows)
    for cuts in ([0, 100], [0, 3, 100], [0, 2, 5, 100], [0, 1, 2, 3, 4, 5, 6, 7, 100]):
        local, parts, scans = [], [], []
        for src, (a, b) in enumerate(zip(cuts[:-1], cuts[1:])):
            mine = (rows["rank"] >= a) & (rows["rank"] < b)
            r = {name: col[mine] for name, col in rows.items()}
            groups = c.LocalGroups.of(r)
            local.append((groups.members, groups.group, groups.start_idx))
            parts.append(c._partials(groups, src))
            scans.append(groups.scan_rows(src))
        instances, reply = c.combine_partials({name: np.concatenate([p[name] for p in parts]) for name in parts[0]})
        for name, col in want_instances.items():
            assert np.array_equal(instances[name], col) and instances[name].dtype == col.dtype, (cuts, name)
        releases = c.scan_releases({name: np.concatenate([p[name] for p in scans]) for name in scans[0]})
        got = [c._with_scan_releases(
            c._member_results(m, group, start_idx, {name: col[reply["src"] == src] for name, col in reply.items()}),
            {name: col[releases["src"] == src] for name, col in releases.items()})
            for src, (m, group, start_idx) in enumerate(local)]
        got = {name: np.concatenate([g[name] for g in got]) for name in got[0]}
        assert list(got) == list(c.MEMBER_RESULTS)
        # each analysis rank's members are in instance order; all of them: in (rank, call) order
        a, b = np.lexsort((want["call"], want["rank"])), np.lexsort((got["call"], got["rank"]))
        for name in c.MEMBER_RESULTS:
            assert np.array_equal(want[name][a], got[name][b]), (cuts, name)
            if len(cuts) == 2:
                assert np.array_equal(want[name], got[name]), name
