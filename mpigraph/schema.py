"""Every output table's columns: name, kind and meaning (docs/outputs.md is made from them).

kind: "time" (int64 ns in Parquet, seconds in CSV), "int", "float", "str", "bool".
"""

from collections import namedtuple

Column = namedtuple("Column", "name kind help")

# The wait-state kinds, in the order of their codes (mpigraph.metrics.waits).
WAIT_STATES = ("late_sender", "late_receiver", "wait_nxn", "wait_barrier", "late_broadcast", "early_reduce",
               "early_scan", "wait_neighbor", "late_post", "early_wait", "held")

RANK_COLUMNS = [
    Column("rank", "int", "MPI_COMM_WORLD rank"),
    Column("host", "str", "host name"),
    Column("pid", "int", "process id"),
    Column("program_start", "time", "end of the first MPI_Init, from the run's start (the earliest of all ranks)"),
    Column("program_end", "time", "start of the last MPI_Finalize (end of the last record if not finalised), "
                                  "from the run's start"),
    Column("program_time", "time", "program_end - program_start"),
    Column("mpi_time", "time", "summed duration of the rank's MPI calls, Init and Finalize excluded"),
    Column("mpi_fraction", "float", "mpi_time / program_time"),
    Column("execution", "time", "summed execution time of its calls (duration - wait_before - wait_after, never "
                                "negative: mpigraph.metrics.waits), Init and Finalize excluded"),
    Column("wait_before", "time", "summed wait before its calls (waiting for other ranks to arrive; a collective "
                                  "by its pattern: N-to-N the last member, 1-to-N the root, N-to-1 the root for "
                                  "the last member, Scan the lower ranks; and members the MPI held until a later "
                                  "member came)"),
    Column("wait_after", "time", "summed wait after its calls (collectives: others left earlier)"),
    Column("wait", "time", "wait_before + wait_after"),
    Column("compute", "time", "time between its MPI calls (compute edges of the graph)"),
    Column("imbalance", "float", "share of the rank's time spent waiting for other ranks: wait / (wait + "
                                 "execution + compute), from 0 to 1 (0: never waited)"),
    Column("late_sender", "time", "wait state: receives waiting for a late send"),
    Column("late_receiver", "time", "wait state: sends waiting for a late receive (rendezvous)"),
    Column("wait_nxn", "time", "wait state: N-to-N collectives (not Barrier) waiting for the last member"),
    Column("wait_barrier", "time", "wait state: MPI_Barrier waiting for the last member"),
    Column("late_broadcast", "time", "wait state: 1-to-N members waiting for the root"),
    Column("early_reduce", "time", "wait state: N-to-1 root waiting for the last member"),
    Column("early_scan", "time", "wait state: Scan/Exscan member waiting for the latest lower rank"),
    Column("wait_neighbor", "time", "wait state: neighbourhood collective member waiting for its latest "
                                    "in-neighbour"),
    Column("late_post", "time", "wait state: one-sided origin (MPI_Win_start ... MPI_Win_complete) waiting for "
                                "its target's MPI_Win_post"),
    Column("early_wait", "time", "wait state: one-sided target's MPI_Win_wait waiting for its origins' "
                                 "MPI_Win_complete"),
    Column("held", "time", "wait state: collective members their MPI library held beyond their pattern, until "
                           "the member they were held for arrived (Reduce/Gather non-roots for the root, a large "
                           "Bcast's root for the last member)"),
    Column("clock_offset", "time", "clock correction applied: offset to rank 0 at MPI_Init"),
    Column("clock_drift_ppm", "float", "clock correction applied: drift against rank 0, parts per million"),
    Column("clock_shift", "time", "forward shift at its end from the receive-before-send repair"),
    Column("calls", "int", "MPI calls (call records)"),
    Column("records", "int", "records in the log (calls and their parts)"),
    Column("bytes_sent", "int", "point-to-point bytes sent"),
    Column("bytes_received", "int", "point-to-point bytes received"),
    Column("bytes_collective", "int", "bytes passed to collectives"),
    Column("finalized", "bool", "the rank reached MPI_Finalize: its log has the call (false: it crashed or was "
                                "killed before)"),
    Column("recording_dropped", "bool", "the shim stopped recording early (disk full): calls are missing"),
    Column("log_closed", "bool", "the shim closed the log in MPI_Finalize (false: the rank ended before that)"),
    Column("incomplete_requests", "int", "nonblocking operations started and never completed or freed in the log"),
    Column("time_on_path", "time", "time of the rank's segments on the critical path (0 when no path)"),
]

FUNCTION_COLUMNS = [
    Column("function", "str", "MPI function name"),
    Column("function_id", "int", "mpigraph's function id (mpigraph.trace.functions)"),
    Column("kind", "str", "function kind (send, recv, n_to_n, completion, ...)"),
    Column("calls", "int", "calls over all ranks"),
    Column("ranks", "int", "ranks that called it"),
    Column("time_total", "time", "summed duration of its calls"),
    Column("time_mean", "time", "time_total / calls"),
    Column("time_min", "time", "shortest call"),
    Column("time_max", "time", "longest call"),
    Column("wait_before", "time", "summed wait before its calls"),
    Column("wait_after", "time", "summed wait after its calls"),
    Column("execution", "time", "summed execution time of its calls"),
    Column("bytes_sent", "int", "point-to-point bytes sent"),
    Column("bytes_received", "int", "point-to-point bytes received"),
    Column("bytes_collective", "int", "bytes passed to collectives"),
    Column("device_calls", "int", "calls with a GPU device buffer (calls.parquet's device_buffer)"),
    Column("time_on_path", "time", "time of its calls and the messages into them on the critical path"),
]

CALL_COLUMNS = [
    Column("rank", "int", "MPI_COMM_WORLD rank"),
    Column("call", "int", "index of the call among the rank's calls (log order, from 0)"),
    Column("seq", "int", "collective sequence number on its communicator (0: not a collective)"),
    Column("function", "str", "MPI function"),
    Column("start", "time", "call start, from the run's start (aligned clocks)"),
    Column("end", "time", "call end, from the run's start"),
    Column("peer", "int", "partner as a world rank (-1 none, -2 MPI_PROC_NULL, -3 any source)"),
    Column("tag", "int", "message tag (-1 none, -2 any tag)"),
    Column("comm", "int", "communicator id (0 = MPI_COMM_WORLD)"),
    Column("bytes", "int", "bytes of the call (see metrics: how bytes are counted)"),
    Column("root", "int", "root of a rooted collective as a world rank (-1 none)"),
    Column("calls", "int", "calls the row stands for: 1, or more for failed polls of the same arguments "
                           "merged into one record (MPIGRAPH_POLL_GAP_NS)"),
    Column("wait_before", "time", "wait before, within the call's duration (collective: until the member it "
                                  "waits for by its pattern arrived; a nonblocking collective's in the Wait/Test "
                                  "that completed it; point-to-point: late sender or receiver)"),
    Column("wait_after", "time", "wait after (blocking N-to-N collective: end - min end, within the duration "
                                 "left)"),
    Column("execution", "time", "execution time: duration - wait_before - wait_after (never negative)"),
    Column("wait_state", "str", "wait-state kind of the call (empty: none)"),
    Column("wait_state_time", "time", "time of that wait state"),
    Column("other_state_time", "time", "point-to-point: the part of the wait charged to the other kind "
                                       "(late_receiver when wait_state is late_sender, and the reverse)"),
    Column("callsite", "int", "call site (callsites.csv): where in the program the call was made"),
    Column("device_buffer", "bool", "a buffer of the call (message, collective) is GPU device memory, as the CUDA "
                                    "driver loaded in the program says (false without one; docs/concepts.md)"),
    Column("on_path", "bool", "the critical path spends time in the call or passes through it (false when no path)"),
]

# Call sites (mpigraph.callsites): mpiP's call-site statistics, one row per place and MPI function.
CALLSITE_COLUMNS = [
    Column("callsite", "int", "call-site id (the callsite column of calls.parquet), from 1"),
    Column("name", "str", "\"MPI_Allreduce at solver.c:212\"; \"MPI_Send in exchange\" for a program built without "
                          "-g; an mpi4py program's calls are made by mpi4py's extension module (its function)"),
    Column("function", "str", "MPI function"),
    Column("caller", "str", "the program's function that made the call (object+offset when it has no symbol)"),
    Column("file", "str", "source file of the call (empty without debug information)"),
    Column("line", "int", "source line of the call (0 without debug information)"),
    Column("object", "str", "the executable or shared library the call is in"),
    Column("stack", "str", "its callers, innermost first (\"callsites_main.c:40 < main\"), with "
                           "MPIGRAPH_CALLSITE_DEPTH=k above 1: the call site is then the stack of k frames; empty "
                           "otherwise"),
    Column("count", "int", "calls made there, over all ranks"),
    Column("time", "time", "summed duration of those calls"),
    Column("wait", "time", "summed wait (before + after) of those calls"),
    Column("bytes", "int", "summed bytes of those calls"),
    Column("ranks", "int", "ranks that called it"),
    Column("time_cov", "float", "coefficient of variation of the ranks' time there: std / mean over those ranks "
                                "(mpiP's COV; 0 for one rank)"),
    Column("path_time", "time", "time of its calls on the critical path"),
]

# The wait-state table's per-call-site twin (mpigraph.callsites.stats.combined_waitstates).
CALLSITE_WAITSTATE_COLUMNS = [
    Column("callsite", "int", "call site (callsites.csv)"),
    Column("name", "str", "its name (\"MPI_Recv at halo.c:40\")"),
    Column("function", "str", "MPI function"),
    Column("kind", "str", "wait state: " + ", ".join(WAIT_STATES)),
    Column("calls", "int", "calls there with this wait state, over all ranks"),
    Column("time", "time", "summed time of this wait state"),
]

COLLECTIVE_COLUMNS = [
    Column("comm", "int", "communicator id"),
    Column("seq", "int", "sequence number on the communicator"),
    Column("function", "str", "MPI function"),
    Column("members", "int", "ranks that took part (recorded)"),
    Column("comm_size", "int", "size of the communicator (-1 unknown)"),
    Column("complete", "bool", "members == comm_size"),
    Column("max_start", "time", "latest start: when the last member arrived"),
    Column("min_end", "time", "earliest end (of a nonblocking collective: of the Wait/Test calls that completed "
                              "it)"),
    Column("time_total", "time", "summed duration of the members' calls (of a nonblocking collective: the "
                                  "Wait/Test calls that completed it)"),
    Column("wait_total", "time", "summed wait (before + after) of the members, by the collective's pattern, as "
                                 "in calls.parquet"),
    Column("execution", "time", "time_total - wait_total (never negative)"),
    Column("imbalance", "float", "share of the members' time spent waiting: wait_total / time_total, from 0 to "
                                 "1; empty when time_total is 0"),
    Column("last_rank", "int", "the member that arrived last"),
    Column("root", "int", "root (-1 none)"),
    Column("seed_execution", "time", "seed 004's instance execution: min_end - max_start (negative when a "
                                     "member left before the last arrived, as rooted collectives may)"),
    Column("seed_wait_total", "time", "seed 004's wait: sum over the members of (max_start - start) + (end - "
                                      "min_end), as if every collective were a barrier"),
    Column("seed_imbalance", "float", "seed 004's imbalance: seed_wait_total / (members * seed_execution); "
                                      "empty when seed_execution <= 0; not a share (may exceed 1)"),
]

WAITSTATE_COLUMNS = [
    Column("rank", "int", "MPI_COMM_WORLD rank"),
    Column("function", "str", "MPI function"),
    Column("kind", "str", "wait state: " + ", ".join(WAIT_STATES)),
    Column("calls", "int", "calls with this wait state"),
    Column("time", "time", "summed time of this wait state"),
]

UNMATCHED_COLUMNS = [
    Column("rank", "int", "the rank of the operation (-1 for a collective instance)"),
    Column("what", "str", "send | receive | completion | request | collective"),
    Column("reason", "str", "why it has no partner"),
    Column("function", "str", "MPI function of the call that posted it"),
    Column("call", "int", "call index on the rank (-1 for a collective instance)"),
    Column("comm", "int", "communicator id"),
    Column("peer", "int", "partner world rank as posted or received (-3 any source)"),
    Column("tag", "int", "tag (or, for a collective instance, its sequence number)"),
    Column("bytes", "int", "bytes"),
]

SEGMENT_COLUMNS = [
    Column("order", "int", "position on the path, from 0"),
    Column("rank", "int", "the rank whose time this segment is"),
    Column("kind", "str", "compute, mpi or message"),
    Column("function", "str", "MPI function of the call (or of the call a message released); empty for compute"),
    Column("peer", "int", "the other rank of a message segment, -1 otherwise"),
    Column("start", "time", "segment start, from the run's start"),
    Column("end", "time", "segment end, from the run's start"),
    Column("duration", "time", "end - start"),
    Column("callsite", "int", "call site of the segment's call (callsites.csv; mpi: the longest call it overlaps, "
                              "message: the call it released), 0 for compute or an unknown site"),
    Column("callsite_name", "str", "that call site's name (\"MPI_Allreduce at solver.c:212\"), empty for 0"),
]

# Calls in flight when the run ended (mpigraph.trace.inflight): a run that hung, was killed or aborted.
INFLIGHT_COLUMNS = [
    Column("rank", "int", "MPI_COMM_WORLD rank"),
    Column("thread", "int", "thread slot within the rank (0: the thread that called MPI_Init)"),
    Column("function", "str", "the MPI call it was in"),
    Column("peer", "int", "its peer as a world rank (-1 none, -2 MPI_PROC_NULL, -3 any source)"),
    Column("tag", "int", "its tag (-1 none, -2 any tag; MPI_Abort: the error code)"),
    Column("comm", "int", "communicator id"),
    Column("seq", "int", "collective sequence number on comm (0 for none)"),
    Column("requests", "int", "requests waited for (Wait family), else 0"),
    Column("since", "time", "when the call began, from the end of the rank's MPI_Init (its own clock)"),
    Column("deadlock", "int", "the deadlock cycle the rank is in (from 0), -1 for none"),
]

# The communication matrix (mpigraph.traffic.matrix; apportioning rules in docs/concepts.md).
COMM_MATRIX_COLUMNS = [
    Column("src", "int", "sending MPI_COMM_WORLD rank"),
    Column("dst", "int", "receiving MPI_COMM_WORLD rank; -1: a collective's bytes with no pairs (Allreduce, "
                         "Scan, the v-variants of Scatter and Alltoall: counted per rank, see concepts.md)"),
    Column("messages", "int", "messages (point-to-point) or collective calls apportioned to the pair"),
    Column("bytes", "int", "bytes: received (point-to-point), apportioned (collectives)"),
    Column("kind", "str", "p2p (matched messages) or collective"),
]

# Message-size histograms (mpigraph.traffic.sizes).
SIZE_COLUMNS = [
    Column("function", "str", "MPI function that posted the send or receive, or the collective"),
    Column("comm", "str", "communicator name (communicators.csv)"),
    Column("comm_id", "int", "communicator id (calls.parquet's comm)"),
    Column("bin_lo", "int", "smallest size of the bin, bytes: 0, or a power of two"),
    Column("bin_hi", "int", "largest size of the bin, bytes: 0, or 2 * bin_lo - 1"),
    Column("count", "int", "sends, receives or collective calls (one per member) of a size in the bin"),
    Column("bytes", "int", "their summed bytes"),
]

# The size histograms' per-call-site twin (mpigraph.traffic.sizes): summed over the call sites, sizes.csv.
CALLSITE_SIZE_COLUMNS = [
    Column("callsite", "int", "call site of the call that posted the send or receive, or of the collective call "
                              "(callsites.csv)"),
    Column("callsite_name", "str", "its name (\"MPI_Isend at halo.c:40\")"),
] + SIZE_COLUMNS

# The communicators of the run (mpigraph.traffic.communicators).
COMMUNICATOR_COLUMNS = [
    Column("id", "int", "communicator id (calls.parquet's comm; 0 is MPI_COMM_WORLD)"),
    Column("name", "str", "name in the report: world, or <creating call>#<k> (<size> ranks)"),
    Column("size", "int", "ranks in the communicator"),
    Column("members", "str", "their MPI_COMM_WORLD ranks in its rank order; a rule past 16: a-b, a-b:step"),
    Column("function", "str", "the call that created it (MPI_Init for world)"),
    Column("call", "int", "that call's index among the calls of the communicator's rank 0 (-1: unknown)"),
    Column("parent", "str", "the communicator the creating call was made on"),
    Column("callsite", "int", "call site of that call (callsites.csv), 0 for world and where unknown"),
    Column("callsite_name", "str", "its name (\"MPI_Comm_split at solver.c:40\"), empty for 0"),
]

# Phases (mpigraph.phases): the run split at MPI_Pcontrol calls and at the named regions of the
# phase API (mpigraph_phase_begin/_end); written when a rank marked one.
_PHASE_SUMS = [
    Column("calls", "int", "MPI calls"),
    Column("time_total", "time", "summed duration of the calls"),
    Column("wait_before", "time", "summed wait before the calls"),
    Column("wait_after", "time", "summed wait after the calls"),
    Column("execution", "time", "summed execution time of the calls"),
    Column("bytes_sent", "int", "point-to-point bytes sent (counted as in ranks.csv)"),
    Column("bytes_received", "int", "point-to-point bytes received"),
    Column("bytes_collective", "int", "bytes passed to collectives"),
]
_PHASE_KEY = [
    Column("phase", "int", "Pcontrol phase: 0 before a rank's first MPI_Pcontrol, k from its k-th MPI_Pcontrol on"),
    Column("level", "int", "the level the phase's MPI_Pcontrol passed (-1 for phase 0)"),
    Column("name", "str", "the named regions open (phase API), outermost first, joined by /; empty outside any"),
]
PHASE_COLUMNS = _PHASE_KEY + [
    Column("ranks", "int", "ranks that made calls in the phase"),
    Column("functions", "int", "MPI functions called in the phase"),
    Column("time", "time", "the ranks' time in the phase (mark to next mark, inside each rank's program time), "
                           "summed over ranks"),
    Column("critical_path", "time", "time of the critical path's segments inside the phase (on the segment's rank)"),
] + _PHASE_SUMS
PHASE_FUNCTION_COLUMNS = _PHASE_KEY + [
    Column("function", "str", "MPI function name"),
    Column("ranks", "int", "ranks that called it in the phase"),
] + _PHASE_SUMS

# The per-phase function table's per-call-site twin (mpigraph.phases.callsites): the columns of
# callsites.csv per phase; summed over the phases, each call site's count, time, wait, bytes and
# path_time are callsites.csv's.
PHASE_CALLSITE_COLUMNS = _PHASE_KEY + [
    Column("callsite", "int", "call site (callsites.csv)"),
    Column("callsite_name", "str", "its name (\"MPI_Allreduce at solver.c:212\")"),
    Column("function", "str", "MPI function"),
    Column("count", "int", "calls made there in the phase, over all ranks"),
    Column("time", "time", "summed duration of those calls"),
    Column("wait", "time", "summed wait (before + after) of those calls"),
    Column("bytes", "int", "summed bytes of those calls"),
    Column("ranks", "int", "ranks that called it in the phase"),
    Column("time_cov", "float", "coefficient of variation of those ranks' time there in the phase (as callsites.csv)"),
    Column("path_time", "time", "time of its calls in the phase on the critical path"),
]
