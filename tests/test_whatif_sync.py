"""whatif's graph on neighbourhood collectives and post/start/complete/wait epochs: known answers
on real runs of tests/programs/neighbor_rma.c (4 ranks, ITERATIONS iterations, each an
MPI_Barrier, then the late rank computes 50 ms before its part; see that file's header).

By hand, from the program alone (d = ceil(log2 4) = 2 latencies per N-to-N instance over the
4 ranks; MPI_Comm_free and MPI_Win_free release nobody; every chain crosses every barrier):

- the graph's synchronisation edges: one per (member, in-neighbour) per iteration: cart 2 (P - 1)
  (a non-periodic line), ring P (a directed ring); late post one per origin (P - 1), early wait
  one per origin (P - 1);
- far out (dL = 1 s: more than T(0), so the chain with the most messages is the longest): per
  iteration the barrier's 2 plus the longest chain of synchronisation messages between two
  barriers, plus 2 for the communicator's or window's creation: cart, ring and icart: one
  neighbour message (S(in-neighbour) -> E(member): no chain within one instance), so
  2 (ITERATIONS + 1) + ITERATIONS; early wait: the post reaches origin 3's MPI_Win_start or
  MPI_Put (both end after the post, which starts right after the barrier while origin 3
  computes 50 ms before its Put), then origin 3's MPI_Win_complete reaches the target's
  MPI_Win_wait: 2 per iteration; late post: the same 2 where an origin's MPI_Win_start or
  MPI_Put ended after the target's post started (the implementation made it wait there),
  else the post and the complete are parallel (both into the complete's end and from its
  start): 1 (read from the run's calls);
- at dL = 0: T(0) is the measured run time (at least the ITERATIONS delays, which are on the
  path) and equals the report's critical path length, and the report's path crosses the
  same messages: lambda_L(0) = 2 (ITERATIONS + 1) + the report path's dependency segments
  into neighbourhood and epoch calls.
"""

import numpy as np
import pyarrow.parquet as pq
import pytest

import mpi_env

RANKS = 4
ITERATIONS = 4
DELAY_S = 50e-3                      # DELAY_MS of neighbor_rma.c
FAR_S = 1.0                          # added latency far beyond T(0): the most messages win
HUBS = ITERATIONS + 1                # the barriers and the creation of the communicator or window
SYNC_FUNCTIONS = {"MPI_Neighbor_allgather", "MPI_Neighbor_alltoall", "MPI_Wait", "MPI_Win_start", "MPI_Win_wait",
                  "MPI_Put", "MPI_Win_complete"}


@pytest.fixture(scope="module")
def program(tmp_path_factory):
    mpi = mpi_env.wheel_mpi()
    assert mpi, "no mpicc/mpiexec found: install with pip install '.[mpich,test]'"
    builder = mpi_env.Builder(str(tmp_path_factory.mktemp("programs")))
    return mpi, builder.build("neighbor_rma.c", mpi.mpicc)


_RUNS = {}


@pytest.fixture
def run(request, program, tmp_path_factory):
    mode = request.param
    if mode not in _RUNS:
        mpi, exe = program
        base = tmp_path_factory.mktemp(mode)
        done = mpi_env.mpirun(mpi, RANKS, [exe, mode, ITERATIONS, base / "file.dat"], out=base / "run",
                              rank_env={"MPIGRAPH_CLOCK": "none", "MPIGRAPH_QUIET": "1"})
        assert done.returncode == 0, done.stdout + done.stderr
        _RUNS[mode] = str(base / "run")
    return mode, _RUNS[mode]


def model(run_dir):
    from mpigraph.whatif import build, whatif

    graph = build.build(build.matched_run(run_dir, "none"))
    return graph, whatif(run_dir, latency=(0.0, FAR_S), clock="none")


def edges_of(graph, name):
    from mpigraph.whatif import build

    return int((graph.kind == build.KIND_NAMES.index(name)).sum())


def report_path(run_dir):
    return pq.read_table(run_dir + "/critical_path.parquet").to_pydict()


def waited_before_complete(run_dir):
    """Per iteration: whether an origin's MPI_Win_start or MPI_Put ended at or after the target's
    MPI_Win_post started (the late-post edge then ends before the origin's complete)."""
    c = pq.read_table(run_dir + "/calls.parquet").to_pydict()
    rank, func, start, end = (np.array(c[k]) for k in ("rank", "function", "start_ns", "end_ns"))
    post = start[(rank == 0) & (func == "MPI_Win_post")]
    out = np.zeros(ITERATIONS, bool)
    for r in range(1, RANKS):              # a loop over origins
        for name in ("MPI_Win_start", "MPI_Put"):
            out |= end[(rank == r) & (func == name)] >= post
    return out


def check_T0(graph, result, run_dir):
    path = report_path(run_dir)
    assert result.T0_s == pytest.approx(result.measured_s, abs=1e-9)
    assert result.T0_s == pytest.approx(sum(path["duration_ns"]) * 1e-9, abs=1e-9)
    assert result.T0_s >= ITERATIONS * DELAY_S
    # lambda_L(0): the report's path is one of the paths tight at dL = 0 (its length is T(0)), with
    # the barriers' and creation's 2 latencies each and its synchronisation messages'; lambda_L(0)
    # is the steepest of the tight paths (delta mode makes every dependency the trace shows tight,
    # and on a loaded machine another path can tie with the report's): at least that, at most
    # the slope far out.
    kind, function = np.array(path["kind"], object), np.array(path["function"], object)
    crossed = int(((kind == "message") & np.isin(function, list(SYNC_FUNCTIONS))).sum())
    assert 2 * HUBS + crossed <= result.lambda_L <= result.pieces[-1]["lambda_L"], (result.lambda_L, crossed)


@pytest.mark.parametrize("run, pairs", [("cart", 2 * (RANKS - 1)), ("icart", 2 * (RANKS - 1)), ("ring", RANKS)],
                         indirect=["run"])
def test_neighbourhood_collective_one_latency_per_instance(run, pairs):
    mode, run_dir = run
    graph, result = model(run_dir)
    assert edges_of(graph, "neighbor") == ITERATIONS * pairs
    assert result.pieces[-1]["lambda_L"] == 2 * HUBS + ITERATIONS
    check_T0(graph, result, run_dir)


@pytest.mark.parametrize("run", ["late_post", "early_wait"], indirect=True)
def test_epochs_post_then_complete(run):
    mode, run_dir = run
    graph, result = model(run_dir)
    assert edges_of(graph, "rma_late_post") == ITERATIONS * (RANKS - 1)
    assert edges_of(graph, "rma_early_wait") == ITERATIONS * (RANKS - 1)
    chain = 2 * np.ones(ITERATIONS, int) if mode == "early_wait" else 1 + waited_before_complete(run_dir)
    assert result.pieces[-1]["lambda_L"] == 2 * HUBS + chain.sum(), (result.pieces, chain)
    check_T0(graph, result, run_dir)


@pytest.mark.parametrize("run", ["cart", "late_post"], indirect=True)
def test_delta_gives_every_measured_time_back(run):
    """The new edges keep delta mode exact: the forward pass at dL = 0 gives every call's
    measured start and end back."""
    from test_whatif import every_time_back

    every_time_back(run[1])


# ---- a hand-built run: every in-neighbour gets an edge, not only the latest ---------------

def hand_built():
    """Three ranks, times in ns, every call instantaneous (start = end), each rank MPI_Init
    ending at 0 and MPI_Finalize last.  Neighbourhood instance A: rank 0's member at 10 is
    released by rank 2's member at 0.  Instance B: rank 1's member at 5 has in-neighbours
    0 (its member at 20, after A) and 2 (its member at 30, the latest: the match stage's
    release; the call lasts until 31, when the latest data came).  Finalizes: ranks 0 and 2
    at 100, rank 1 at 125.

    loggps with o = 0 (calls and messages cost only L; the gaps as measured):
      E(0, A) = max(10, 0 + L);  S(0, B) = E(0, A) + 10 = max(20, L + 10)
      E(1, B) = max(5, S(0, B) + L, 30 + L) = max(30 + L, 10 + 2L)
      T = max(100, S(0, B) + 80, E(1, B) + 94) = max(124 + L, 104 + 2L)
    so T = 124 + L up to L = 20 ns, then 104 + 2L: rank 0's chain of two messages overtakes
    the latest in-neighbour's one.  With the latest in-neighbour's edge only it would stay
    124 + L."""
    from types import SimpleNamespace

    from mpigraph.match import p2p
    from mpigraph.trace import functions as mf
    from mpigraph.whatif import build, sync

    init, fin, nb = (mf.BY_NAME[n].id for n in ("MPI_Init", "MPI_Finalize", "MPI_Neighbor_allgather"))
    starts = {0: [0, 10, 20, 100], 1: [0, 5, 125], 2: [0, 0, 30, 100]}
    ends = {0: [0, 10, 20, 100], 1: [0, 31, 125], 2: [0, 0, 30, 100]}
    calls = {}
    for r, t in starts.items():
        func = np.array([init] + [nb] * (len(t) - 2) + [fin])
        calls[r] = SimpleNamespace(start_ns=np.array(t, np.int64), end_ns=np.array(ends[r], np.int64),
                                   n_calls=len(t), func=func)
    messages = {name: np.zeros(0, np.int64) for name in p2p.MESSAGE_COLUMNS}
    groups = SimpleNamespace(members={"rank": np.zeros(0, np.int32)})
    # (source rank, call) -> (destination rank, call): A, then B's two in-neighbours
    pairs = [((2, 1), (0, 1)), ((0, 2), (1, 1)), ((2, 2), (1, 1))]
    cols = dict(src_rank=[p[0][0] for p in pairs], src_call=[p[0][1] for p in pairs],
                dst_rank=[p[1][0] for p in pairs], dst_call=[p[1][1] for p in pairs],
                bytes=[0] * 3, func=[nb] * 3, kind=[sync.NEIGHBOR] * 3)
    matched = build.Matched(3, calls, messages, groups, np.zeros(0), {k: np.array(v, np.int64)
                                                                      for k, v in cols.items()})
    params = build.NetParams(o_ns=0.0, L0_ns=0.0, G0_ns=0.0, S_bytes=1e9, source="hand-built")
    return build, matched, params


def test_hand_built_every_in_neighbour_counts():
    from mpigraph.whatif.envelope import Model

    build, matched, params = hand_built()
    graph = build.build(matched, model="loggps", params=params)
    assert (graph.kind == build.NEIGHBOR).sum() == 3
    pieces = Model(graph.edges).envelope(0.0, 100.0)
    got = [(p.lo, p.hi, p.slope, p.intercept) for p in pieces]
    assert got == [pytest.approx((0.0, 20.0, 1, 124.0)), pytest.approx((20.0, 100.0, 2, 104.0))], got
    # the latest in-neighbour alone: one line
    only_latest = {k: v[[0, 2]] for k, v in matched.sync.items()}
    matched.sync = only_latest
    pieces = Model(build.build(matched, model="loggps", params=params).edges).envelope(0.0, 100.0)
    assert [(p.slope, p.intercept) for p in pieces] == [pytest.approx((1, 124.0))]


def test_hand_built_delta_gives_the_measured_times_back():
    """delta mode at dL = 0: every measured time from the ends of MPI_Init on, and T(0) = 125
    (the latest Finalize start)."""
    from mpigraph.whatif.envelope import Model

    build, matched, params = hand_built()
    graph = build.build(matched, model="delta", params=params)
    _, (t, _) = Model(graph.edges).forward([0.0], keep=True)
    reached = np.isfinite(t) & np.isfinite(graph.vertex_time)
    assert reached.sum() == len(graph.vertex_time) - 1 - 3          # but the sink and the Init starts
    np.testing.assert_allclose(t[reached], graph.vertex_time[reached], atol=1e-9)
    assert graph.measured_ns == 125 and t[graph.edges.sink] == 125
