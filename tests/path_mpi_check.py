"""Run under mpiexec: every graph algorithm, distributed over the job's ranks, against the
serial reference computed on rank 0 alone.  Started by test_paths_mpi.py; exits 1 on a mismatch.

    mpiexec -n 3 python tests/path_mpi_check.py [--gather-after ROUNDS] [--delta-stepping-joins]
                                                [--distances-only] [--small-chunks]
                                                [--researched-joins-only] [--researched-share S]
                                                [--times-reversed] [--join-when-done]

--gather-after sets parallel-dijkstra's rounds before its search of the parts joined
(parallel_dijkstra.rounds_before_joining): 0 at once, 1 after one round of offers.
--times-reversed gives the joined search's vertices the negated times: every edge between
slabs goes back in time, so the relay (paths.relay) declines and the parts are joined on rank 0.
--researched-joins-only leaves parallel-dijkstra one reason to join: a round after the first
that lowered more than parallel_dijkstra.RESEARCHED_SHARE of the distances (--researched-share).
--join-when-done finds, for each case, the rounds parallel-dijkstra's offers take to end with
the joined search off, then solves again with the join due at exactly that round: a search
whose offers are over is not joined (the count of joined searches stays 0), and its rounds
and path are the same.
--delta-stepping-joins makes the delta-stepping algorithms give up their light phases at once
for that joined search (delta_stepping.seconds_before_joining: 0 s).
--small-chunks makes next[]'s pass take 3 edges a chunk (labels.CHUNK_EDGES) and exchange the
edges whose sources other ranks own every 2 chunks (labels.CHUNKS_PER_EXCHANGE): many chunks,
an exchange of several of them, and a last one after an odd count; and splits.pieces ask the
owners of the vertices (splits.GATHER_POINT_CALLS 0) instead of gathering the few points' table.
"""

import os
import sys
import traceback

import numpy as np
from mpi4py import MPI

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pathbuild import SETTINGS, random_input, rows, share, solve_all  # noqa: E402

from mpigraph import paths
from mpigraph.testing import synth  # noqa: E402
from mpigraph.paths import delta_stepping, labels, parallel_dijkstra, splits, walk  # noqa: E402
from mpigraph.paths import segments as critical_path  # noqa: E402


def cases():
    """(name, whole-run PathInput, options): the same on every rank."""
    yield "bsp", synth.path_input(synth.ring_run(5, 8, sync_every=2, seed=7)), {}
    yield "bsp-jitter", synth.path_input(synth.ring_run(4, 8, sync_every=3, seed=8, clock_noise_ns=20_000)), {}
    yield "bsp-threshold", synth.path_input(synth.ring_run(4, 6, sync_every=2, seed=9)), {"threshold_s": 1e-6}
    for seed in range(6):
        yield "random-%d" % seed, random_input(seed, 2 + seed % 3, 6, 25, collectives=seed % 3), {}
    yield "two-ranks-on-many", synth.path_input(synth.ring_run(2, 4, seed=10)), {}
    # No synchronisation point: the path crosses between the ranks phase after phase.
    yield "ring-no-sync", synth.path_input(synth.ring_run(4, 12, sync_every=100, seed=11)), {}
    for seed in range(3):     # slacks of seconds: int64 weights on every rank, whichever has them
        yield "seconds-%d" % seed, random_input(seed, 3, 6, 25, collectives=1, step_ns=2**31), {}


def distance_mismatches(comm, inp, options):
    """Where the distances of parallel-dijkstra and parallel-delta-stepping, gathered from the
    job's ranks, differ from sequential Dijkstra's on the whole graph (splits on and off); [] on
    the other ranks.  The path alone can hide a wrong distance off it."""
    from mpigraph.paths import graph
    from mpigraph.paths import dijkstra

    threshold_ns = int(round(options.get("threshold_s", 0) * 1e9))
    whole = graph.build(MPI.COMM_SELF, inp, threshold_ns) if comm.rank == 0 else None
    expected = {split: dijkstra.solve(whole, split).dist[:whole.n_rank_vertices] if comm.rank == 0 else None
                for split in (True, False)}
    bad = []
    # The part with the edges into other ranks' hubs kept on the members' side (and then not
    # in the hub owner's rows: only the searches with splits, which never read those rows,
    # are given it, as search.critical_path does) and without (in the hub owner's rows).
    for remote_hub_edges in (True, False):
        part = graph.build(comm, share(inp, comm.size, comm.rank), threshold_ns, remote_hub_edges)
        delta = delta_stepping.auto_delta(comm, part)
        n_edges = comm.allreduce(part.n_edges)
        foreign = comm.allreduce(int((~part.owns(part.src[part.first_hub_edge:])).sum()))
        if comm.rank == 0:
            # Every edge once, wherever it is kept; with the edges kept on the members' side, none
            # from another rank's member in a hub's row (the copy that was sent and never read).
            if n_edges != whole.n_edges:
                bad.append("remote hub edges %s: %d edges over the ranks, %d in the whole graph"
                           % (remote_hub_edges, n_edges, whole.n_edges))
            if remote_hub_edges and foreign:
                bad.append("%d edges into hubs from other ranks' members on the hubs' owners" % foreign)
            if delta != delta_stepping.auto_delta(MPI.COMM_SELF, whole):
                bad.append("remote hub edges %s: auto_delta %d, %d on the whole graph"
                           % (remote_hub_edges, delta, delta_stepping.auto_delta(MPI.COMM_SELF, whole)))
        searches = {"parallel-dijkstra": lambda split: parallel_dijkstra.solve(comm, part, split),
                    "parallel-delta-stepping": lambda split: delta_stepping.solve(comm, part, delta, split)}
        for split in (True,) if remote_hub_edges else (True, False):
            for name, solve in searches.items():
                dist = comm.gather(solve(split).dist[:part.hi - part.lo], root=0)
                if comm.rank == 0:
                    got = np.concatenate(dist)
                    if not np.array_equal(got, expected[split]):
                        bad.append("%s distances, splits %s, remote hub edges %s: %d of %d differ"
                                   % (name, split, remote_hub_edges, int((got != expected[split]).sum()),
                                      len(got)))
    return bad


def told_source_mismatches(comm, inp, options):
    """Where this rank's part of the graph, built from edges that carry their sources' starts
    (the match stage's: no owner is asked for the sources on other ranks), differs from the part
    whose sources are all asked of their owners; [] where none does (on every rank)."""
    from mpigraph.paths import graph

    threshold_ns = int(round(options.get("threshold_s", 0) * 1e9))
    told = graph.build(comm, share(inp, comm.size, comm.rank, with_starts=True), threshold_ns)
    asked = graph.build(comm, share(inp, comm.size, comm.rank, with_starts=False), threshold_ns)
    differ = [name for name in ("time", "indptr", "src", "weight", "sources", "source_piece", "hub_time")
              if not np.array_equal(getattr(told, name), getattr(asked, name))]
    differ = comm.gather(differ, root=0)
    return ["rank %d: %s differ with the sources told" % (r, d) for r, d in enumerate(differ or []) if d]


def sync_point_mismatches(comm, inp, options):
    """Where the synchronisation points found on the job's ranks, each holding its own trace
    ranks' columns of the member-call table, differ from those found on one rank (keys, times,
    the columns side by side), or where splits.pieces of every rank vertex, each rank asking
    about all of them (most owned elsewhere), differs from piece_of on the whole table; [] on
    the other ranks."""
    from mpigraph.paths import graph, splits

    threshold_ns = int(round(options.get("threshold_s", 0) * 1e9))
    found = []
    find = splits.find_sync_points
    splits.find_sync_points = lambda *args: found.append(find(*args)) or found[-1]
    try:
        whole = graph.build(MPI.COMM_SELF, inp, threshold_ns) if comm.rank == 0 else None
        part = graph.build(comm, share(inp, comm.size, comm.rank), threshold_ns)
    finally:
        splits.find_sync_points = find
    mine = found[-1]
    every = np.arange(part.n_rank_vertices, dtype=np.int64)
    got = splits.pieces(comm, inp.n_trace_ranks, part.base, mine, every)
    columns = comm.gather((mine.first, mine.calls), root=0)
    if comm.rank != 0:
        return []
    reference, bad = found[0], []
    table = np.concatenate([c for _, c in sorted(columns, key=lambda fc: fc[0])], axis=1)
    if mine.keys.tolist() != reference.keys.tolist() or mine.time.tolist() != reference.time.tolist():
        bad.append("sync points: keys %s, %s on one rank" % (mine.keys.tolist(), reference.keys.tolist()))
    elif table.tolist() != reference.calls.tolist():
        bad.append("sync points: the member calls differ from one rank's")
    if got.tolist() != splits.piece_of(whole.base, reference.calls, every).tolist():
        bad.append("splits.pieces differs from piece_of on the whole table")
    return bad


def _counter(owner, name):
    """A count of the calls of owner.name from now on (a one-item list)."""
    count = [0]
    function = getattr(owner, name)

    def counted(*args):
        count[0] += 1
        return function(*args)

    setattr(owner, name, counted)
    return count


def join_when_done_mismatches(comm, inp, options, joined):
    """``--join-when-done`` for one case, splits on and off: what differs, [] when nothing does."""
    bad = []
    part = share(inp, comm.size, comm.rank)
    for split in (True, False):
        never = {}
        parallel_dijkstra.rounds_before_joining = lambda n_analysis: 10**9
        parallel_dijkstra.seconds_before_joining = lambda n_elements: float("inf")
        parallel_dijkstra.RESEARCHED_SHARE = 2.0
        alone = critical_path.whole(comm, paths.critical_path(comm, part, "parallel-dijkstra", split, stats=never,
                                                               **options))
        parallel_dijkstra.rounds_before_joining = lambda n_analysis: never["rounds"]
        before, due = joined[0], {}
        at_end = critical_path.whole(comm, paths.critical_path(comm, part, "parallel-dijkstra", split, stats=due,
                                                                **options))
        if joined[0] != before:
            bad.append("splits %s: joined after its %d rounds were over" % (split, never["rounds"]))
        if due["rounds"] != never["rounds"] or (comm.rank == 0 and rows(at_end) != rows(alone)):
            bad.append("splits %s: %d rounds and a path against %d rounds" % (split, due["rounds"], never["rounds"]))
    return bad


def main():
    comm = MPI.COMM_WORLD
    if "--gather-after" in sys.argv:
        rounds = int(sys.argv[sys.argv.index("--gather-after") + 1])
        parallel_dijkstra.rounds_before_joining = lambda n_analysis: rounds
    if "--researched-joins-only" in sys.argv:
        # No join by count or time: only after a round that lowered most distances again.
        parallel_dijkstra.rounds_before_joining = lambda n_analysis: 10**9
        parallel_dijkstra.seconds_before_joining = lambda n_elements: float("inf")
    if "--researched-share" in sys.argv:
        parallel_dijkstra.RESEARCHED_SHARE = float(sys.argv[sys.argv.index("--researched-share") + 1])
    if "--delta-stepping-joins" in sys.argv:
        delta_stepping.seconds_before_joining = lambda n_elements: 0.0
    if "--small-chunks" in sys.argv:
        labels.CHUNK_EDGES = 3
        labels.CHUNKS_PER_EXCHANGE = 2
        splits.GATHER_POINT_CALLS = 0
    if "--times-reversed" in sys.argv:
        times = parallel_dijkstra._JoinedSearch._times
        parallel_dijkstra._JoinedSearch._times = lambda self: -times(self)
    joined = _counter(parallel_dijkstra._JoinedSearch, "distances")     # by either algorithm
    gathered = _counter(parallel_dijkstra._JoinedSearch, "_gathered")
    delta_joined = _counter(delta_stepping, "joined_distances")
    walks = _counter(walk, "distributed")
    run_walks = _counter(walk._Runs, "walk")        # once per distributed walk: no round per rank change
    failures = 0
    for name, inp, options in cases():
        if "--join-when-done" in sys.argv:
            bad = join_when_done_mismatches(comm, inp, options, joined)
            failures += len(bad)
            if comm.rank == 0:
                print("%-18s %s" % (name, "MISMATCH %s" % bad if bad else "not joined once done"))
            continue
        if "--distances-only" in sys.argv:
            bad = distance_mismatches(comm, inp, options)
            failures += len(bad)
            if comm.rank == 0:
                print("%-18s %s" % (name, "MISMATCH %s" % bad if bad else "distances equal"))
            continue
        reference = paths.critical_path(MPI.COMM_SELF, inp, "dijkstra", False, **options) if comm.rank == 0 else None
        slacks = {}
        results = solve_all(share(inp, comm.size, comm.rank), comm=comm, slacks=slacks, **options)
        if comm.rank == 0:
            expected = rows(reference)
            bad = [setting for setting in SETTINGS if rows(results[setting]) != expected]
        bad = (comm.bcast(bad if comm.rank == 0 else None, root=0) + distance_mismatches(comm, inp, options)
               + sync_point_mismatches(comm, inp, options) + told_source_mismatches(comm, inp, options))
        if comm.rank == 0:
            failures += len(bad)
            print("%-18s %d segments, slack %s: %s" % (name, len(expected), sorted(set(slacks.values())),
                                                       "MISMATCH %s" % bad if bad else "all %d equal" % len(SETTINGS)))
    failures = comm.bcast(failures, root=0)
    if comm.rank == 0:
        print("searches of the parts joined: %d, on rank 0: %d" % (joined[0], gathered[0]))
        print("delta-stepping joined searches: %d" % delta_joined[0])
        print("distributed walks: %d, their rounds of runs: %d" % (walks[0], run_walks[0]))
        print("path_mpi_check on %d ranks: %s" % (comm.size, "FAILED" if failures else "OK"))
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    try:
        main()
    except Exception:     # one rank's error must end the job, not leave the others in a collective
        traceback.print_exc()
        sys.stderr.flush()
        MPI.COMM_WORLD.Abort(1)
