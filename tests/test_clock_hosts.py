"""Clocks per host (issue 27, item 4) and a receive-before-send repair that converges.

- ranks of one host (same hostname and boot id) get one line: their host
  leader's; the ping-pong samples of the others are not used;
- on a real run of one host (4 ranks, a halo with persistent requests and an
  MPI_Allreduce per iteration) every offset and drift is 0 and no
  receive-before-send violation is found;
- a chain of 99 dependencies, each made late by the repair of the one before
  (a pipeline with zero slack), is repaired in one match round: no violation
  left (the old repair, one hop per match round, stopped after 64 rounds).
"""

import csv
import os
import sys

import numpy as np
import pytest
from mpi4py import MPI

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import mpi_env  # noqa: E402
from mpigraph.clock import models as clock  # noqa: E402
from mpigraph.comm import parallel  # noqa: E402
from mpigraph.match import link  # noqa: E402
from mpigraph.trace import logs as trace  # noqa: E402
from mpigraph.trace import record  # noqa: E402
from tracebuild import rec, write_rank  # noqa: E402

NPROCS = 4


def samples_on(hosts, boot_ids=None):
    """SAMPLES_DTYPE rows of len(hosts) ranks on those hostnames (boot ids default "b")."""
    s = np.zeros(len(hosts), clock.SAMPLES_DTYPE)
    s["rank"] = np.arange(len(hosts))
    s["parent"] = [r - (r & -r) if r else -1 for r in range(len(hosts))]
    s["hostname"] = [h.encode() for h in hosts]
    s["boot_id"] = [b.encode() for b in (boot_ids or ["b"] * len(hosts))]
    return s


def test_a_host_is_a_hostname_and_a_boot_id():
    s = samples_on(["a", "a", "b", "a", "", ""], ["x", "x", "x", "y", "x", "x"])
    # Rank 3 shares rank 0's hostname but not its boot (another machine of that name); ranks
    # without a hostname are hosts of their own.  Hosts are numbered by their lowest rank.
    assert clock.host_index(s).tolist() == [0, 0, 1, 2, 3, 4]
    assert clock.host_leaders(s).tolist() == [0, 0, 2, 3, 4, 5]


def two_host_samples(offset_b, drift_b, noise=(7_000_000, -3_000_000)):
    """Ranks 0, 1 on host a (clock = true time), ranks 2, 3 on host b (true + offset_b + drift_b t).

    Rank 1's and rank 3's own ping-pongs (to a rank of their host) carry `noise`, as a busy
    node's do: per host alignment must not use them."""
    s = samples_on(["a", "a", "b", "b"])
    own = lambda r, t: t + (offset_b + drift_b * t if r >= 2 else 0.0)  # noqa: E731
    for end, t in (("init", 1_000_000), ("final", 2_000_000_000)):
        for r in range(1, 4):
            p = s["parent"][r]
            s[end]["local_ns"][r] = round(own(r, t))
            s[end]["offset_ns"][r] = round(own(r, t) - own(p, t))
        s[end]["offset_ns"][1] += noise[0]
        s[end]["offset_ns"][3] += noise[1]
        s[end]["local_ns"][0] = t
    return s, own


@pytest.mark.parametrize("method", ["pingpong", "barrier"])
def test_ranks_of_one_host_get_their_leaders_line(method):
    s, own = two_host_samples(5_000_000, 40e-6)
    lines = clock.lines_for(method, s)
    assert lines.offset[1] == 0 and lines.drift[1] == 0             # rank 0's host: rank 0's clock
    assert (lines.ref[3], lines.offset[3], lines.drift[3]) == (lines.ref[2], lines.offset[2], lines.drift[2])
    if method == "pingpong":                  # rank 2's ping-pong with rank 0 gives host b's truth
        for t in (1_000_000, 1_000_000_000, 2_000_000_000):
            assert abs(lines.to_global(3, np.array([round(own(3, t))]))[0] - t) <= 2


def test_without_host_names_every_rank_is_aligned_on_its_own():
    s, _ = two_host_samples(5_000_000, 40e-6)
    s["hostname"] = b""
    lines = clock.pingpong_lines(s)
    assert lines.offset[1] == pytest.approx(7_000_000, abs=1)        # its own (noisy) ping-pong


# ---- the repair converges -----------------------------------------------------------------

CHAIN = 100          # ranks of the pipeline: 99 messages, each receive ending as its send starts


def write_pipeline(run_dir, early_ns):
    """Rank r receives from r - 1 (its receive ends when the send starts: zero slack) and sends to
    r + 1 ten ns later.  Rank 1's receive ends `early_ns` before its send began."""
    for r in range(CHAIN):
        t = 1000 + 10 * r                                     # rank r's send starts
        rows = [rec("MPI_Init", 0, 100)]
        if r:
            rows.append(rec("MPI_Recv", 200, t - 10 - (early_ns if r == 1 else 0), record.RECV, peer=r - 1, tag=1,
                            bytes=8))
        if r < CHAIN - 1:
            rows.append(rec("MPI_Send", t, t + 5, record.SEND, peer=r + 1, tag=1, bytes=8))
        rows.append(rec("MPI_Finalize", 100_000, 100_000))
        write_rank(run_dir, r, CHAIN, rows)


def test_a_chain_longer_than_the_rounds_is_repaired_whole(tmp_path):
    write_pipeline(tmp_path, 50)
    comm = MPI.COMM_WORLD
    calls, info = link.aligned_calls(comm, trace.open_run(str(tmp_path)).logs, "none")
    linked = link.link(comm, parallel.Ownership(CHAIN, 1), calls, CHAIN, info)
    repair = linked.repair
    # One violation at first; moving rank 1 by 50 makes its send late for rank 2, and so on down
    # the pipeline: 99 repairs, one match round, nothing left.
    assert (repair.found, repair.repaired, repair.remaining, repair.rounds) == (1, CHAIN - 1, 0, 1)
    assert repair.shift_ns == {r: 50 for r in range(1, CHAIN)}
    for r in range(1, CHAIN - 1):             # times from the end of MPI_Init (100): send at 900 + 10 r + 50
        assert linked.calls[r].start_ns[2] == 900 + 10 * r + 50
        assert linked.calls[r + 1].end_ns[1] == linked.calls[r].start_ns[2]
    assert linked.calls[0].start_ns[1] == 900                       # the source is not moved


# ---- one host, a real run -------------------------------------------------------------------

@pytest.fixture(scope="module")
def halo_run(tmp_path_factory, builder, wheel):
    exe = builder.build("halo.c", wheel.mpicc)
    out = tmp_path_factory.mktemp("run") / "halo"
    result = mpi_env.mpirun(wheel, NPROCS, [exe, "40", "300", "1"], out=out, rank_env={"MPIGRAPH_QUIET": "1"})
    assert result.returncode == 0, result.stderr[-4000:]
    return out


def test_one_host_has_no_offsets_no_drift_and_no_violations(halo_run):
    logs = trace.open_run(str(halo_run)).logs
    assert len({(log.header["hostname"], log.header["boot_id"]) for log in logs.values()}) == 1
    assert all(len(log.header["boot_id"]) == 36 for log in logs.values())      # a uuid, read by the shim
    with open(halo_run / "ranks.csv", newline="") as f:
        ranks = list(csv.DictReader(f))
    assert len(ranks) == NPROCS
    assert [float(r["clock_offset_s"]) for r in ranks] == [0.0] * NPROCS
    assert [float(r["clock_drift_ppm"]) for r in ranks] == [0.0] * NPROCS
    text = (halo_run / "summary.txt").read_text()
    assert "Clock correction: pingpong; receive-before-send violations found 0, repaired 0" in text
    assert "  1 host; the ranks of a host share its clock (one offset, no drift)" in text
    # The ping-pongs were taken all the same (they are what another host would be aligned by).
    samples = clock.samples_of(logs)
    assert (samples["init"]["rtt_ns"][1:] > 0).all()


def test_the_chain_is_repaired_the_same_on_several_analysis_ranks(tmp_path):
    """The shifts' breakpoints travel between analysis ranks (a chain crosses them): 3 analysis
    ranks repair the pipeline exactly as one does."""
    runs = {}
    for n in (1, 3):
        write_pipeline(tmp_path / str(n), 50)
        cmd = ["analyze", str(tmp_path / str(n)), "--quiet"]
        result = mpi_env.mpigraph(cmd, nprocs=n if n > 1 else None, env_extra={"MPIGRAPH_CLOCK": "none"})
        assert result.returncode == 0, result.stderr[-4000:]
        with open(tmp_path / str(n) / "ranks.csv", newline="") as f:
            runs[n] = [int(r["clock_shift_ns"]) if "clock_shift_ns" in r else round(float(r["clock_shift_s"]) * 1e9)
                       for r in csv.DictReader(f)]
        text = (tmp_path / str(n) / "summary.txt").read_text()
        assert "violations found 1, repaired %d in 1 round" % (CHAIN - 1) in text
    assert runs[1] == runs[3] == [0] + [50] * (CHAIN - 1)
