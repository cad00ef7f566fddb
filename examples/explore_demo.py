"""Explore a profiled run with pandas: where the time went, who waited, what the critical path is.

    mpigraph demo --out demo-run
    python examples/explore_demo.py demo-run

Works on any run directory mpigraph wrote (mpigraph run, demo or analyze).  The same lines work
in a Jupyter notebook, where each DataFrame shows as a table.
"""

import sys

import mpigraph


def seconds(frame, columns):
    """The *_ns columns of `frame` as seconds, named without the suffix."""
    return frame[columns].rename(columns=lambda c: c[:-3] if c.endswith("_ns") else c).apply(
        lambda col: col / 1e9 if col.name + "_ns" in columns else col)


def main(run_dir):
    run = mpigraph.load(run_dir)
    print(run)
    facts = run.facts
    print("\n%d ranks on %s, run time %.3f s, %d MPI calls; critical path by %s"
          % (facts["ranks"], ", ".join(facts["hosts"]), facts["run_time_ns"] / 1e9, facts["calls"],
             facts["algorithm"]))

    # Where each rank's time went: compute, MPI execution, waiting for others.
    ranks = run.ranks.set_index("rank")
    print("\nTime per rank (s):")
    print(seconds(ranks, ["program_time_ns", "compute_ns", "execution_ns", "wait_ns", "time_on_path_ns"])
          .round(4).to_string())

    # The functions that took the most time, Init and Finalize left out.
    functions = run.functions[~run.functions["function"].isin(["MPI_Init", "MPI_Finalize"])]
    print("\nTop MPI functions (s):")
    print(seconds(functions.set_index("function"), ["calls", "time_total_ns", "wait_before_ns"])
          .head(5).round(4).to_string())

    # Wait states: who waited, in which function, for what.
    waits = run.waitstates.groupby(["kind", "rank"])["time_ns"].sum().unstack(fill_value=0) / 1e9
    print("\nWait states (s), a column per rank:")
    print(waits.round(4).to_string())

    # The critical path: which rank and which kind of time it runs through.
    path = run.critical_path
    per_rank = path.groupby("rank")["duration_ns"].sum().sort_values(ascending=False)
    print("\nCritical path: %.3f s in %d segments; share by kind:" % (path["duration_ns"].sum() / 1e9, len(path)))
    print((path.groupby("kind")["duration_ns"].sum() / path["duration_ns"].sum()).round(3).to_string())
    print("most time on the critical path: rank %d (%.1f%%)"
          % (per_rank.index[0], 100.0 * per_rank.iloc[0] / path["duration_ns"].sum()))

    # The calls table has every call: the 3 longest waits before a call.
    calls = run.calls.nlargest(3, "wait_before_ns")[["rank", "call", "function", "wait_before_ns", "wait_state"]]
    print("\nLongest waits before a call:")
    print(calls.to_string(index=False))


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python examples/explore_demo.py RUN_DIR   (after: mpigraph demo --out RUN_DIR)")
    main(sys.argv[1])
