"""Hand-built runs for the topological-sort tests (written with tests/tracebuild.py).

Each builder writes the raw logs of one run into a directory; TRACES names
them all.  Times are CLOCK_MONOTONIC ns.  They are built so that the awkward
cases of the parallel algorithm happen: groups that span several analysis
ranks' time ranges, equal start times on both sides of a range boundary,
zero-length intervals, equal durations (ties), part records, a run with one
rank, a rank with nothing between Init and Finalize.
"""

import numpy as np

import tracebuild as tb


def _write(run_dir, calls_by_rank):
    """calls_by_rank[r]: list of tracebuild records (dicts) in order."""
    for rank, rows in enumerate(calls_by_rank):
        tb.write_rank(run_dir, rank, len(calls_by_rank), rows)


def _finish(rows, at):
    rows.append(tb.rec("MPI_Finalize", at, at + 50))
    return rows


BSP_BASE_NS = 1_000_000


def bsp_slow_rank(phase, ranks):
    """The rank that computes three times as long in `phase` of the bsp trace."""
    return (2 * phase + 1) % ranks


def bsp(run_dir, ranks=5, phases=6, seed=1):
    """Phases of compute then MPI_Allreduce; one known slow rank per phase (bsp_slow_rank)."""
    rng = np.random.default_rng(seed)
    rows = [[tb.rec("MPI_Init", 0, 1000 + 13 * r)] for r in range(ranks)]
    ready = np.array([1000 + 13 * r for r in range(ranks)])
    for p in range(phases):
        work = (BSP_BASE_NS * (1 + 0.2 * rng.random(ranks))).astype(np.int64)
        work[bsp_slow_rank(p, ranks)] = 3 * BSP_BASE_NS
        arrive = ready + work
        leave = arrive.max() + 400 + 7 * np.arange(ranks)
        for r in range(ranks):
            rows[r].append(tb.rec("MPI_Allreduce", arrive[r], leave[r], seq=p + 1))
        ready = leave
    return _write(run_dir, [_finish(rows[r], ready[r] + 2000) for r in range(ranks)])


def spanning(run_dir, ranks=5, seed=2):
    """Long intervals that overlap hundreds of short ones: groups spanning several ranges.

    Section 1: rank 0 computes 10 ms while the others make 150 short calls each.
    Section 2: a chain of long intervals on ranks 2, 3, 4, each starting before the
    previous ends, all one group.  Barriers separate the sections.
    """
    rng = np.random.default_rng(seed)
    rows = [[tb.rec("MPI_Init", 0, 1000)] for _ in range(ranks)]

    def short_calls(r, t, until):
        while True:
            gap, dur = int(rng.integers(1000, 5000)), int(rng.integers(100, 400))
            if t + gap + dur >= until:
                return
            rows[r].append(tb.rec("MPI_Send", t + gap, t + gap + dur, peer=(r + 1) % ranks))
            t += gap + dur

    for r in range(1, ranks):
        short_calls(r, 1000, 9_000_000)
    for r in range(ranks):
        rows[r].append(tb.rec("MPI_Barrier", 10_000_000 if r == 0 else 9_500_000, 10_000_100, seq=1))
    chain = {2: (10_000_100, 14_000_000), 3: (13_000_000, 17_000_000), 4: (16_500_000, 19_000_000)}
    for r in range(ranks):
        if r in chain:
            a, b = chain[r]
            if a > 10_000_100:
                rows[r].append(tb.rec("MPI_Recv", 10_000_200, a, peer=r - 1))
            rows[r].append(tb.rec("MPI_Barrier", b, 19_000_200, seq=2))
        else:
            short_calls(r, 10_000_100, 18_900_000)
            rows[r].append(tb.rec("MPI_Barrier", 18_950_000, 19_000_200, seq=2))
    return _write(run_dir, [_finish(rows[r], 19_010_000) for r in range(ranks)])


def ties(run_dir, ranks=4, steps=120):
    """Every rank has the same timeline: equal starts across ranks, equal durations, and
    zero-length intervals (a call starting when the previous one ends)."""
    rows = []
    for r in range(ranks):
        t, mine = 1000, [tb.rec("MPI_Init", 0, 1000)]
        for k in range(steps):
            gap = 0 if k % 5 == 0 else 2000 + 1000 * (k % 3)
            mine.append(tb.rec("MPI_Allreduce", t + gap, t + gap + 300, seq=k + 1))
            t += gap + 300
        rows.append(_finish(mine, t + 500))
    return _write(run_dir, rows)


def random_run(run_dir, ranks=7, calls=400, seed=3):
    """Random gaps (some zero) and call lengths, Waitall calls with part records."""
    rng = np.random.default_rng(seed)
    rows = []
    for r in range(ranks):
        t, mine = int(rng.integers(500, 2000)), []
        mine.append(tb.rec("MPI_Init", 0, t))
        for k in range(calls):
            gap = int(rng.choice([0, rng.integers(1, 200), rng.integers(1000, 50000)]))
            dur = int(rng.integers(0, 3000))
            if k % 7 == 3:
                call = tb.rec("MPI_Waitall", t + gap, t + gap + dur)
                mine += [call, tb.part(call, request=1), tb.part(call, request=2)]
            else:
                mine.append(tb.rec("MPI_Isend", t + gap, t + gap + dur, peer=(r + 1) % ranks, request=k))
            t += gap + dur
        rows.append(_finish(mine, t + int(rng.integers(0, 1000))))
    return _write(run_dir, rows)


def one_rank(run_dir):
    """A run of one rank (analysed by up to 4 analysis ranks: most own nothing)."""
    rows, t = [tb.rec("MPI_Init", 0, 100)], 100
    for k in range(60):
        rows.append(tb.rec("MPI_Barrier", t + 1000 * (k % 4 + 1), t + 1000 * (k % 4 + 1) + 50, seq=k + 1))
        t += 1000 * (k % 4 + 1) + 50
    return _write(run_dir, [_finish(rows, t + 10)])


def idle_rank(run_dir):
    """Rank 1 only calls Init and Finalize; rank 0 works."""
    busy = [tb.rec("MPI_Init", 0, 100)] + [tb.rec("MPI_Send", 1000 * k, 1000 * k + 200, peer=1)
                                           for k in range(1, 30)]
    return _write(run_dir, [_finish(busy, 31_000), _finish([tb.rec("MPI_Init", 0, 150)], 31_000)])


def simple(run_dir):
    return tb.write_simple_run(run_dir, 4)


TRACES = {"bsp": bsp, "spanning": spanning, "ties": ties, "random": random_run, "one-rank": one_rank,
          "idle-rank": idle_rank, "simple": simple}
