"""How many calls of each MPI function the test programs make, per rank.

Each function below mirrors its program step by step (the numbered comments
in the source); change both together.  `per_rank(program, rank, nranks)`
gives one rank's counts, `totals(program, nranks)` the sums over all ranks,
which is what functions.csv holds.

Counts were checked on a real run with an LD_PRELOAD library that counts
every MPI_* / PMPI_* / Fortran entry point (not part of the repo).

LOCAL holds the calls that only ask the library something (rank, size,
element count): a profiler may leave them out, but when it reports one, its
count must be right.  SELF_REPORTED holds the functions whose count depends
on timing: the program prints each rank's count on stderr as
"<prog>: rank R <MPI_Function> N".
"""

import re
from collections import Counter

LOCAL = {"MPI_Comm_rank", "MPI_Comm_size", "MPI_Get_count", "MPI_Init", "MPI_Init_thread",
         "MPI_Finalize", "MPI_Initialized", "MPI_Finalized", "MPI_Wtime", "MPI_Query_thread"}


def calls_c(rank, nranks):
    """tests/programs/calls.c (nranks >= 2); MPI_Test is self-reported."""
    c = Counter()
    c.update({"MPI_Init": 1, "MPI_Comm_rank": 1, "MPI_Comm_size": 1})
    c["MPI_Bcast"] += 1                                                   # 1
    c.update({"MPI_Send": 1, "MPI_Recv": 1})                              # 2
    if rank == 0:                                                         # 3
        c["MPI_Recv"] += nranks - 1
    else:
        c["MPI_Send"] += 1
    c["MPI_Barrier"] += 1
    c.update({"MPI_Irecv": 2, "MPI_Isend": 2, "MPI_Waitall": 1})          # 4
    c["MPI_Sendrecv"] += 1                                                # 5
    c.update({"MPI_Irecv": 1, "MPI_Isend": 1, "MPI_Wait": 2})             # 6
    c.update({"MPI_Irecv": 1, "MPI_Isend": 1, "MPI_Wait": 1})             # 7 (+ MPI_Test)
    c.update({"MPI_Comm_split": 1, "MPI_Comm_rank": 1, "MPI_Comm_size": 1,
              "MPI_Allreduce": 1, "MPI_Comm_free": 1})                    # 8
    c.update({"MPI_Allreduce": 1, "MPI_Reduce": 1, "MPI_Scan": 1,
              "MPI_Alltoall": 1, "MPI_Scatter": 1})                       # 9
    c.update({"MPI_Ibarrier": 1, "MPI_Wait": 1})                          # 10
    c.update({"MPI_Send_init": 1, "MPI_Recv_init": 1, "MPI_Start": 6,
              "MPI_Wait": 6, "MPI_Request_free": 2})                      # 11
    c.update({"MPI_Send": 1, "MPI_Probe": 1, "MPI_Get_count": 1, "MPI_Recv": 1})  # 12
    c.update({"MPI_Gather": 1, "MPI_Barrier": 1})                         # 13
    c["MPI_Finalize"] += 1
    return dict(c)


def calls_f90(rank, nranks):
    """tests/programs/calls.f90 and calls_f08.f90 (the same steps), nranks >= 2."""
    c = Counter()
    c.update({"MPI_Init": 1, "MPI_Comm_rank": 1, "MPI_Comm_size": 1})
    c["MPI_Bcast"] += 1                                                   # 1
    c.update({"MPI_Send": 1, "MPI_Recv": 1})                              # 2
    c.update({"MPI_Irecv": 2, "MPI_Isend": 2, "MPI_Waitall": 1})          # 3
    c.update({"MPI_Irecv": 1, "MPI_Isend": 1, "MPI_Wait": 2})             # 4
    c.update({"MPI_Comm_split": 1, "MPI_Comm_rank": 1, "MPI_Comm_size": 1,
              "MPI_Allreduce": 1, "MPI_Comm_free": 1})                    # 5
    c.update({"MPI_Allreduce": 1, "MPI_Barrier": 1, "MPI_Gather": 1})     # 6
    c["MPI_Finalize"] += 1
    return dict(c)


def calls_py(rank, nranks):
    """tests/programs/calls_py.py: only the calls the script itself makes
    (mpi4py makes more of its own at import: Init_thread, attribute queries...).
    mpi4py 4 may call the MPI-4 large-count variants (MPI_Send_c, ...): a count
    here is the sum of MPI_X and MPI_X_c."""
    c = Counter()
    c["MPI_Bcast"] += 1                                                   # 1
    c.update({"MPI_Send": 1, "MPI_Recv": 1})                              # 2
    c.update({"MPI_Irecv": 1, "MPI_Isend": 1, "MPI_Waitall": 1})          # 3
    c["MPI_Allreduce"] += 2                                               # 4
    c.update({"MPI_Comm_split": 1, "MPI_Comm_free": 1})                   # 4
    c.update({"MPI_Barrier": 1, "MPI_Gather": 1})                         # 5
    return dict(c)


PROGRAMS = {"calls.c": calls_c, "calls.f90": calls_f90, "calls_f08.f90": calls_f90,
            "calls_py.py": calls_py}
SELF_REPORTED = {"calls.c": {"MPI_Test"}}


def per_rank(program, rank, nranks):
    return PROGRAMS[program](rank, nranks)


def totals(program, nranks):
    """Counts summed over the ranks {function: calls}, as functions.csv has them."""
    total = Counter()
    for r in range(nranks):
        total.update(per_rank(program, r, nranks))
    return dict(total)


def self_reported(stderr, program_tag):
    """{function: calls summed over ranks} from lines "<tag>: rank R MPI_X N" on stderr."""
    total = Counter()
    for m in re.finditer(r"^%s: rank (\d+) (MPI_\w+) (\d+)$" % re.escape(program_tag), stderr, re.M):
        total[m.group(2)] += int(m.group(3))
    return dict(total)
