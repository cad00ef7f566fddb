"""The distributed path algorithms under mpiexec with 1, 2 and 3 analysis ranks.

Serial pytest starts tests/path_mpi_check.py under mpiexec, which compares every
algorithm (splits on and off, distributed over the job's ranks) with the serial
reference on rank 0, and asserts on its report.
"""

import os
import sys

import pytest

import mpi_env

N_CASES = 14          # path_mpi_check.cases()
CHECK = os.path.join(os.path.dirname(os.path.abspath(__file__)), "path_mpi_check.py")


@pytest.mark.parametrize("ranks", [1, 2, 3])
def test_distributed_paths_equal_the_serial_reference(ranks):
    returncode, stdout, stderr = mpi_env.run_guarded([sys.executable, CHECK], ranks)
    assert returncode == 0, stdout[-4000:] + stderr[-4000:]
    assert "path_mpi_check on %d ranks: OK" % ranks in stdout, stdout[-4000:]
    assert stdout.count("all 8 equal") == N_CASES, stdout
    # The distributed walk chains its runs on rank 0: one round of runs per walk, however often
    # the path changes rank (ring-no-sync's changes at every phase).
    walks, rounds = stdout.split("distributed walks: ")[1].split("\n")[0].split(", their rounds of runs: ")
    assert int(walks) > N_CASES and int(rounds) == int(walks), stdout


def test_distributed_paths_without_the_c_kernel():
    """Where the path kernel cannot run (no C compiler): csgraph's Dijkstra and numpy's pointer
    jumping find the same paths and distances."""
    returncode, stdout, stderr = mpi_env.run_guarded([sys.executable, CHECK], 3,
                                                     extra_env={"MPIGRAPH_PATH_KERNEL": "off"})
    assert returncode == 0, stdout[-4000:] + stderr[-4000:]
    assert stdout.count("all 8 equal") == N_CASES, stdout


@pytest.mark.parametrize("kernel", ["c", "off"])
@pytest.mark.parametrize("ranks", [2, 3])
def test_next_in_many_chunks_equals_the_serial_reference(ranks, kernel):
    """next[]'s pass over the edges in C (one pass, then one exchange of the edges whose sources
    other ranks own) and, without the kernel, in numpy chunks of 3 edges, each with its
    exchange: the same paths and distances."""
    returncode, stdout, stderr = mpi_env.run_guarded([sys.executable, CHECK, "--small-chunks"], ranks,
                                                     extra_env={"MPIGRAPH_PATH_KERNEL": kernel})
    assert returncode == 0, stdout[-4000:] + stderr[-4000:]
    assert stdout.count("all 8 equal") == N_CASES, stdout


def _joined(stdout):
    """(joined searches, those on rank 0) of path_mpi_check's report."""
    joined, gathered = stdout.split("searches of the parts joined: ")[1].split("\n")[0].split(", on rank 0: ")
    return int(joined), int(gathered)


@pytest.mark.parametrize("ranks", [2, 3])
@pytest.mark.parametrize("gather_after", [0, 1])
def test_parallel_dijkstra_joined_search_equals_the_serial_reference(ranks, gather_after):
    """parallel-dijkstra's search of the parts joined, at once or after a round of offers, finds
    the reference path and distances, like the rounds alone: relayed over slabs of time
    (paths.relay), but where an edge goes back in time across slabs (bsp-jitter's clock noise has
    five such edges), then on rank 0."""
    returncode, stdout, stderr = mpi_env.run_guarded([sys.executable, CHECK, "--gather-after", str(gather_after)],
                                                     ranks)
    assert returncode == 0, stdout[-4000:] + stderr[-4000:]
    assert stdout.count("all 8 equal") == N_CASES, stdout
    joined, gathered = _joined(stdout)
    assert joined - gathered >= (40 if gather_after == 0 else 1), stdout


@pytest.mark.parametrize("ranks", [2, 3])
def test_joined_search_with_times_out_of_order_goes_to_rank_0(ranks):
    """With every edge between slabs going back in time (the times negated), the relay declines
    before anything moves and the parts are searched on rank 0: the reference paths still."""
    returncode, stdout, stderr = mpi_env.run_guarded([sys.executable, CHECK, "--gather-after", "0",
                                                      "--times-reversed"], ranks)
    assert returncode == 0, stdout[-4000:] + stderr[-4000:]
    assert stdout.count("all 8 equal") == N_CASES, stdout
    joined, gathered = _joined(stdout)
    assert gathered >= 40 and joined >= gathered, stdout


def test_parallel_dijkstra_does_not_join_a_search_whose_rounds_are_over():
    """A search whose offers end at the round the join was due (a run with a synchronisation
    point every few calls: its pieces are done in a round or two) is not searched again joined:
    the same rounds and path as with no join at all, on every case, splits on and off."""
    returncode, stdout, stderr = mpi_env.run_guarded([sys.executable, CHECK, "--join-when-done"], 3)
    assert returncode == 0, stdout + stderr
    assert "path_mpi_check on 3 ranks: OK" in stdout, stdout
    assert _joined(stdout) == (0, 0), stdout


@pytest.mark.parametrize("share, joins", [("0.5", True), ("1.0", False)])
def test_parallel_dijkstra_joins_after_a_round_that_searched_most_of_the_graph_again(share, joins):
    """Without the join by rounds or time: a round after the first that lowered more than half
    of the distances again (the cases whose path changes rank at every step) hands over to the
    joined search, and the paths are the reference's; a share of 1 (never) joins nothing."""
    returncode, stdout, stderr = mpi_env.run_guarded(
        [sys.executable, CHECK, "--researched-joins-only", "--researched-share", share], 3)
    assert returncode == 0, stdout[-4000:] + stderr[-4000:]
    assert stdout.count("all 8 equal") == N_CASES, stdout
    joined, _ = _joined(stdout)
    assert (joined > 0) == joins, stdout


@pytest.mark.parametrize("times_reversed", [False, True])
def test_rounds_and_phases_go_on_when_the_joined_graph_does_not_fit(times_reversed):
    """With no memory to spare on rank 0 the parts are not joined there: the relay, which holds a
    slab on each rank, still runs where the times allow it; where they do not (negated),
    parallel-dijkstra's rounds go on, and parallel-delta-stepping's light phases too. The same
    distances either way."""
    returncode, stdout, stderr = mpi_env.run_guarded(
        [sys.executable, CHECK, "--gather-after", "0", "--delta-stepping-joins", "--distances-only"]
        + (["--times-reversed"] if times_reversed else []), 2, extra_env={"MPIGRAPH_TEST_AVAILABLE_BYTES": "1"})
    assert returncode == 0, stdout[-4000:] + stderr[-4000:]
    assert stdout.count("distances equal") == N_CASES, stdout
    joined, gathered = _joined(stdout)
    assert gathered == 0 and joined >= 40, stdout
    assert "delta-stepping joined searches: 0" in stdout, stdout


@pytest.mark.parametrize("ranks", [1, 2, 3])
def test_delta_stepping_joined_search_equals_the_serial_reference(ranks):
    """The delta-stepping algorithms giving up their light phases at once for one Dijkstra search
    of the parts joined on rank 0 (as they do when a chain makes the phases run long) find the
    reference path and distances."""
    returncode, stdout, stderr = mpi_env.run_guarded([sys.executable, CHECK, "--delta-stepping-joins"], ranks)
    assert returncode == 0, stdout[-4000:] + stderr[-4000:]
    assert stdout.count("all 8 equal") == N_CASES, stdout
    joined = int(stdout.split("delta-stepping joined searches: ")[1].split()[0])
    assert joined >= 40, stdout
