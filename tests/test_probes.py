"""Probes and per-message wait-state kinds (issue 27, items 2 and 5), on hand-built logs.

Times are ns (CLOCK_MONOTONIC logs without calibration, clock "none"): every
expected wait and edge below is worked out by hand in the comments.  The run's
time origin is the end of MPI_Init (100): call times in linked.calls are the
log's minus 100.
"""

import numpy as np
import pytest
from mpi4py import MPI

from mpigraph.comm import parallel
from mpigraph.match import core as match
from mpigraph.match import link
from mpigraph.metrics import message_kinds
from mpigraph.metrics import waits as waits_module
from mpigraph.trace import logs as trace
from mpigraph.trace import record
from tracebuild import part, rec, write_rank

ANY = record.PEER_ANY
FOUND = record.MATCHED


def linked_run(run_dir, world_size):
    run = trace.open_run(str(run_dir))
    calls, info = link.aligned_calls(MPI.COMM_WORLD, run.logs, "none")
    return link.link(MPI.COMM_WORLD, parallel.Ownership(world_size, 1), calls, world_size, info)


def edges(linked):
    d = linked.dependencies
    return {(int(a), int(b), int(c), int(e), match.KIND_NAMES[k]) for a, b, c, e, k in
            zip(d.src_rank, d.src_call, d.dst_rank, d.dst_call, d.kind)}


def sender(send_at, tag=5, second_send_at=None):
    """Rank 1: Init, Send(s) to rank 0, Finalize."""
    rows = [rec("MPI_Init", 0, 100), rec("MPI_Send", send_at, send_at + 50, record.SEND, peer=0, tag=tag, bytes=8)]
    if second_send_at is not None:
        rows.append(rec("MPI_Send", second_send_at, second_send_at + 50, record.SEND, peer=0, tag=tag, bytes=8))
    return rows + [rec("MPI_Finalize", 20_000, 20_000)]


# ---- the airport rule -------------------------------------------------------------------------

def test_airport_shares_split_each_piece_among_the_messages_still_waiting():
    # Group 0: waits 0, 300, 1800 -> [0, 300] shared by 2 (150 each), [300, 1800] by the last alone.
    # Group 1: 10, 10, 10.01 (x1000 ns) -> 10000 / 3 each, the last 10 more; rounding goes to the largest.
    shares = message_kinds.airport_shares([0, 0, 0, 1, 1, 1], [300, 0, 1800, 10_000, 10_000, 10_010])
    assert shares.tolist() == [150, 0, 1650, 3333, 3333, 3344]
    assert shares[:3].sum() == 1800 and shares[3:].sum() == 10_010


def test_charged_kinds_per_call():
    # Call 0: two receives 10000 late and a send 10010 late (the tie): 6666 late sender, 3344 late receiver.
    # Call 1: only receives: all 700 late sender.  Call 2: only a send: all 400 late receiver.
    # Call 3: a receive that did not wait and a send 500 late: all late receiver (no split: one kind waited).
    # Call 4: no message.
    # Call 5: a halo with one late neighbour: its receive 10000 late, the send to it 10010:
    #   5000 + 5010: a tie (10 ns apart, within 5% of 10010): late sender.
    # Call 6: a receive 1000 late and a send 9000: 500 late sender, 8500 late receiver.
    position = [0, 0, 0, 1, 1, 2, 3, 3, 5, 5, 5, 5, 6, 6]
    wait = [10_000, 10_000, 10_010, 700, 300, 400, 0, 500, 0, 10_000, 10_010, 0, 1000, 9000]
    receiver = [False, False, True, False, False, True, False, True, False, False, True, True, False, True]
    total, ls, lr = message_kinds.charged(position, wait, receiver, 7)
    assert total.tolist() == [10_010, 700, 400, 500, 0, 10_010, 9000]
    assert ls.tolist() == [6666, 700, 0, 0, 0, 5000, 500] and lr.tolist() == [3344, 0, 400, 500, 0, 5010, 8500]
    state, state_time, other = message_kinds.state_of(total, ls, lr, 0, 1, -1)
    assert state.tolist() == [0, 0, 1, 1, -1, 0, 1]
    assert state_time.tolist() == [6666, 700, 400, 500, 0, 5000, 8500]
    assert other.tolist() == [3344, 0, 0, 0, 0, 5010, 500]


# ---- Probe, then Recv -------------------------------------------------------------------------

def test_a_blocking_probe_waits_for_the_send_of_the_message_it_found(tmp_path):
    # Rank 0 probes any source from 1000 to 5000 and finds (1, tag 5); rank 1 sends it at 4000.
    write_rank(tmp_path, 0, 2, [
        rec("MPI_Init", 0, 100),                                                           # call 0
        rec("MPI_Probe", 1000, 5000, FOUND, peer=1, tag=5, bytes=8),                      # call 1
        rec("MPI_Recv", 5100, 5200, record.RECV, peer=1, tag=5, bytes=8),                 # call 2
        rec("MPI_Finalize", 20_000, 20_000)])
    write_rank(tmp_path, 1, 2, sender(4000))
    linked = linked_run(tmp_path, 2)
    w = linked.waits[0]
    # The probe waited 4000 - 1000 = 3000 for its late sender; the Recv started after the send: 0.
    assert w["wait_before"].tolist()[:3] == [0, 3000, 0]
    assert w["wait_state"].tolist()[:3] == [-1, waits_module.LATE_SENDER, -1]
    assert w["wait_state_time"][1] == 3000 and w["execution"][1] == 4000 - 3000
    assert edges(linked) == {(1, 1, 0, 1, "message_late_sender"),      # the send -> the probe's end
                             (1, 1, 0, 2, "message_late_sender")}      # the send -> the Recv's end


def test_a_probe_finds_the_message_no_earlier_receive_took(tmp_path):
    # Rank 0 posts an Irecv of (1, tag 5) before probing (1, tag 5): the first message goes to the
    # Irecv, so the probe found the second one (sent at 6000), which the Recv after it gets.
    waitall = rec("MPI_Wait", 9000, 9100)
    write_rank(tmp_path, 0, 2, [
        rec("MPI_Init", 0, 100),                                                           # call 0
        rec("MPI_Irecv", 500, 600, record.RECV, peer=1, tag=5, bytes=8, request=1),      # call 1
        rec("MPI_Probe", 1000, 7000, FOUND, peer=1, tag=5, bytes=8),                      # call 2
        rec("MPI_Recv", 7100, 7200, record.RECV, peer=1, tag=5, bytes=8),                 # call 3
        waitall,                                                                           # call 4
        part(waitall, record.RECV, peer=1, tag=5, bytes=8, request=1),
        rec("MPI_Finalize", 20_000, 20_000)])
    write_rank(tmp_path, 1, 2, sender(3000, second_send_at=6000))
    linked = linked_run(tmp_path, 2)
    assert linked.waits[0]["wait_before"][2] == 6000 - 1000
    assert (1, 2, 0, 2, "message_late_sender") in edges(linked)      # the second send -> the probe
    assert (1, 1, 0, 2, "message_late_sender") not in edges(linked)


def test_mprobe_and_mrecv(tmp_path):
    # mpi4py's comm.recv: Mprobe (1000-5000) finds (1, tag 7), Mrecv receives it; the send at 3500.
    write_rank(tmp_path, 0, 2, [
        rec("MPI_Init", 0, 100),
        rec("MPI_Mprobe", 1000, 5000, FOUND, peer=1, tag=7, bytes=30),                    # call 1
        rec("MPI_Mrecv", 5010, 5020, record.RECV, peer=1, tag=7, bytes=30),               # call 2
        rec("MPI_Finalize", 20_000, 20_000)])
    write_rank(tmp_path, 1, 2, sender(3500, tag=7))
    linked = linked_run(tmp_path, 2)
    w = linked.waits[0]
    assert (w["wait_before"][1], w["wait_state"][1]) == (2500, waits_module.LATE_SENDER)
    assert (1, 1, 0, 1, "message_late_sender") in edges(linked)


def test_improbe_loop_and_imrecv(tmp_path):
    # Improbe finds nothing (1000-1100), then finds (1, tag 7) (1200-1300); Imrecv + Wait get it.
    # The send started at 1150, in the gap: the first Improbe waited its whole 100, and for the
    # path it ends at 1200, at or after 1150: the message released it.
    wait = rec("MPI_Wait", 1500, 1600)
    write_rank(tmp_path, 0, 2, [
        rec("MPI_Init", 0, 100),
        rec("MPI_Improbe", 1000, 1100, peer=ANY, tag=7),                                  # call 1
        rec("MPI_Improbe", 1200, 1300, FOUND, peer=1, tag=7, bytes=30),                   # call 2
        rec("MPI_Imrecv", 1400, 1450, record.RECV, peer=1, tag=7, bytes=30, request=1),  # call 3
        wait,                                                                              # call 4
        part(wait, record.RECV, peer=1, tag=7, bytes=30, request=1),
        rec("MPI_Finalize", 20_000, 20_000)])
    write_rank(tmp_path, 1, 2, sender(1150, tag=7))
    linked = linked_run(tmp_path, 2)
    assert linked.waits[0]["wait_before"][1:5].tolist() == [100, 0, 0, 0]
    assert {e for e in edges(linked) if e[3] != 4} == {(1, 1, 0, 1, "message_late_sender")}


# ---- Iprobe loops -------------------------------------------------------------------------------

def polling_rank(found_at=1600):
    """Rank 0: three Iprobes that found nothing (1000-1100, 1200-1300, 1400-1500), the one that
    found (1, tag 5), then the Recv."""
    return [
        rec("MPI_Init", 0, 100),                                                           # call 0
        rec("MPI_Iprobe", 1000, 1100, peer=ANY, tag=5),                                   # call 1
        rec("MPI_Iprobe", 1200, 1300, peer=ANY, tag=5),                                   # call 2
        rec("MPI_Iprobe", 1400, 1500, peer=ANY, tag=5),                                   # call 3
        rec("MPI_Iprobe", found_at, found_at + 100, FOUND, peer=1, tag=5, bytes=8),       # call 4
        rec("MPI_Recv", 1800, 1900, record.RECV, peer=1, tag=5, bytes=8),                 # call 5
        rec("MPI_Finalize", 20_000, 20_000)]


@pytest.mark.parametrize("send_at, released", [(1250, 2), (1330, 2), (1000, 1), (500, 1), (1550, 3), (1650, 4)])
def test_an_iprobe_loop_waits_for_the_message_it_found(tmp_path, send_at, released):
    """Each Iprobe of the loop waited from its start until the send started, within its duration.
    For the path the loop is one wait: an Iprobe that found nothing ends where the next starts
    (1200, 1400, 1600), and the edge goes into the first Iprobe of the loop that ended so at or
    after the send started (a send in the gap 1300-1400 released call 2, not call 3)."""
    write_rank(tmp_path, 0, 2, polling_rank())
    write_rank(tmp_path, 1, 2, sender(send_at))
    linked = linked_run(tmp_path, 2)
    starts = np.array([1000, 1200, 1400, 1600])
    expected = np.clip(send_at - starts, 0, 100).tolist()
    w = linked.waits[0]
    assert w["wait_before"][1:5].tolist() == expected
    assert w["wait_state"][1:5].tolist() == [waits_module.LATE_SENDER if e else -1 for e in expected]
    assert {e for e in edges(linked) if e[3] != 5} == {(1, 1, 0, released, "message_late_sender")}
    # Times from the run's start (the end of MPI_Init, 100): the calls as recorded, the path's
    # ends of the polling calls stretched to the next call's start.
    assert linked.calls[0].end_ns[1:5].tolist() == [1000, 1200, 1400, 1600]
    assert linked.path_ends[0][1:5].tolist() == [1100, 1300, 1500, 1600]
    assert 1 not in linked.path_ends


def test_the_path_leaves_a_polling_loop_for_the_sender(tmp_path):
    """Rank 1 computes until 1330 and sends, in a gap between two of rank 0's Iprobes: the path
    goes from rank 0's Recv back through the loop to the send and rank 1's compute, the loop's
    time before it off the path."""
    from mpigraph import analysis, config

    write_rank(tmp_path, 0, 2, polling_rank())
    write_rank(tmp_path, 1, 2, sender(1330))
    analysis.analyze(str(tmp_path), MPI.COMM_WORLD, config.Config(quiet=True, clock="none"))
    import csv

    with open(tmp_path / "critical_path.csv") as f:
        path = [(r["rank"], r["kind"], r["function"], r["start_s"], r["end_s"]) for r in csv.DictReader(f)]
    # Rank 1 computes from the end of its Init (0) to its send (1230 after the origin at 100).
    assert ("1", "compute", "", "0.000000000", "0.000001230") in path
    # The message released rank 0's second Iprobe, which ends (for the path) at 1300.
    assert ("0", "message", "MPI_Iprobe", "0.000001230", "0.000001300") in path
    assert not any(r[0] == "0" and r[1] == "compute" and r[4] <= "0.000001230" for r in path)


def test_a_probe_whose_message_is_never_received_gets_no_edge(tmp_path):
    write_rank(tmp_path, 0, 2, [
        rec("MPI_Init", 0, 100),
        rec("MPI_Probe", 1000, 5000, FOUND, peer=1, tag=5, bytes=8),
        rec("MPI_Finalize", 20_000, 20_000)])
    write_rank(tmp_path, 1, 2, sender(4000))
    linked = linked_run(tmp_path, 2)
    assert linked.waits[0]["wait_before"][1] == 0
    assert len(linked.dependencies) == 0
    assert len(linked.unmatched["rank"]) == 1                      # the send, as before


def test_a_probe_that_found_nothing_with_a_named_source_is_no_match(tmp_path):
    # Iprobe(source 1, tag 5) found nothing: the shim writes the asked-for source and tag, but no
    # MATCHED flag.  It is a polling call of the run before the Iprobe that found the message.
    rows = polling_rank()
    rows[1] = rec("MPI_Iprobe", 1000, 1100, peer=1, tag=5)
    write_rank(tmp_path, 0, 2, rows)
    write_rank(tmp_path, 1, 2, sender(1250))
    linked = linked_run(tmp_path, 2)
    assert linked.waits[0]["wait_before"][1:5].tolist() == [100, 50, 0, 0]
    assert {e for e in edges(linked) if e[3] != 5} == {(1, 1, 0, 2, "message_late_sender")}
