/* Clock synchronisation samples, taken at MPI_Init and MPI_Finalize.
 *
 * The shim only measures; mpigraph/clock/models.py turns the samples into offsets
 * and drifts.  Two methods are sampled every time, so they can be compared:
 *
 * - ping-pong along a binomial tree: in round k every rank r with
 *   r mod 2^(k+1) == 2^k measures its clock against its parent r - 2^k;
 *   P - 1 pairs in ceil(log2 P) rounds.  Of the exchanges, the one with the
 *   smallest round trip is kept (the least disturbed by queueing): PINGPONGS
 *   of them, more while the best round trip is above TARGET_RTT_NS (a busy
 *   node), up to MAX_PINGPONGS; all within MAX_WINDOW_NS, but never fewer than
 *   MIN_PINGPONGS (on an oversubscribed node one exchange can wait a whole
 *   time slice, so the window alone would leave too few).  Bounds from different exchanges are
 *   not combined: under drift they would disagree by drift x elapsed time.
 * - the barrier-and-median baseline of seed 004 (section 5.4): each rank's
 *   clock before and after N barriers.
 *
 * For tests, MPIGRAPH_TEST_CLOCK_OFFSETS_NS and MPIGRAPH_TEST_CLOCK_DRIFTS_PPM
 * (comma-separated, one value per world rank) skew this rank's clock as seen
 * by the calibration pairs and these samples, so the analysis must recover a
 * known offset and drift.  The wrappers' hot path is not touched by it.
 * A skewed clock is no longer its host's clock: such tests also set
 * MPIGRAPH_TEST_HOSTNAMES (comma-separated, one name per world rank), so the
 * ranks are aligned as ranks of different hosts (mpigraph/clock/models.py
 * aligns hosts, not ranks).
 *
 * Host identity (mg_host_identity): the hostname and the kernel's boot id.
 * Ranks with both equal read one CLOCK_MONOTONIC (the TSC, when used, is
 * calibrated against it), so the analysis gives them one offset and no drift;
 * the boot id tells apart machines that share a hostname (cloned VMs,
 * containers all named "localhost"). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sched.h>
#include <time.h>
#include <unistd.h>

#include "shim.h"

#define PINGPONGS 32          /* usually */
#define MIN_PINGPONGS 8       /* at least, even past MAX_WINDOW_NS */
#define MAX_PINGPONGS 2000    /* at most: while the best round trip is above TARGET_RTT_NS */
#define MAX_WINDOW_NS 10000000 /* and for at most 10 ms (a node so busy that one exchange takes ms) */
#define TARGET_RTT_NS 2000    /* reached at once on an idle node; a busy one needs more tries */
#define STOP INT64_MIN /* the child's last message: no more ping-pongs */
#define TAG 0x6d67 /* on a private communicator: no clash with the program */
#define TAG_ARRIVED (TAG + 1)
#define TAG_VERDICT (TAG + 2)
#define DEFAULT_FINALIZE_TIMEOUT_S 600.0
#define SPIN_POLLS 64 /* polls of a request before each further one yields the core */

static MPI_Comm sync_comm = MPI_COMM_NULL;
static int64_t skew_offset_ns;
static double skew_drift; /* fractional: ppm * 1e-6 */
static int64_t skew_origin_ns;

/* The value at position `index` of a comma-separated list, or 0. */
static double list_value(const char *list, int index)
{
    for (int i = 0; list && *list; i++) {
        char *end;
        double v = strtod(list, &end);
        if (i == index)
            return v;
        list = strchr(end, ',');
        if (list)
            list++;
    }
    return 0;
}

/* The `index`-th name of a comma-separated list into buf; 0 when the list has none. */
static int list_name(const char *list, int index, char *buf, size_t len)
{
    for (int i = 0; list && *list; i++) {
        const char *end = strchr(list, ',');
        size_t n = end ? (size_t)(end - list) : strlen(list);
        if (i == index && n > 0) {
            snprintf(buf, len, "%.*s", (int)n, list);
            return 1;
        }
        list = end ? end + 1 : NULL;
    }
    return 0;
}

void mg_host_identity(char *hostname, size_t hostname_len, char *boot_id, size_t boot_id_len)
{
    memset(hostname, 0, hostname_len);
    memset(boot_id, 0, boot_id_len);
    if (!list_name(getenv("MPIGRAPH_TEST_HOSTNAMES"), mg.world_rank, hostname, hostname_len))
        gethostname(hostname, hostname_len - 1);
    FILE *f = fopen("/proc/sys/kernel/random/boot_id", "r");
    if (!f)
        return; /* not Linux, or /proc not mounted: the hostname alone names the host */
    if (fgets(boot_id, (int)boot_id_len, f))
        boot_id[strcspn(boot_id, "\n")] = '\0';
    fclose(f);
}

int64_t mg_clock_ns(void)
{
    int64_t ns = mg_monotonic_ns();
    return ns + skew_offset_ns + (int64_t)(skew_drift * (double)(ns - skew_origin_ns));
}

void mg_sync_setup(void)
{
    skew_offset_ns = (int64_t)list_value(getenv("MPIGRAPH_TEST_CLOCK_OFFSETS_NS"), mg.world_rank);
    skew_drift = list_value(getenv("MPIGRAPH_TEST_CLOCK_DRIFTS_PPM"), mg.world_rank) * 1e-6;
    skew_origin_ns = mg_monotonic_ns();
    PMPI_Comm_dup(MPI_COMM_WORLD, &sync_comm);
    int r = mg.world_rank;
    mg.header->sync_parent = r == 0 ? -1 : r - (r & -r); /* clear the lowest set bit */
    mg.header->sync_pingpongs = MIN_PINGPONGS;
}

/* Complete `request`, polling; after a few polls each further poll gives the core away first.
 *
 * A blocking MPI call spins: with more ranks than cores (4 ranks on 2 cores), the ranks waiting
 * for their partner or in the barrier took the cores from the pairs at work, and each exchange
 * waited for a time slice (MPI_Init 0.21 -> 0.52 s).  sched_yield lets a runnable partner on
 * this core run at once; on an idle node the first polls complete and nothing changes. */
static void wait_yielding(MPI_Request *request)
{
    int done = 0;
    for (int polls = 0;; polls++) {
        PMPI_Test(request, &done, MPI_STATUS_IGNORE);
        if (done)
            return;
        if (polls >= SPIN_POLLS)
            sched_yield();
    }
}

static void recv_yielding(void *buf, int count, int source)
{
    MPI_Request request;
    PMPI_Irecv(buf, count, MPI_INT64_T, source, TAG, sync_comm, &request);
    wait_yielding(&request);
}

static void send_yielding(void *buf, int count, int dest)
{
    MPI_Request request;
    PMPI_Isend(buf, count, MPI_INT64_T, dest, TAG, sync_comm, &request);
    wait_yielding(&request);
}

static void serve_child(int child)
{
    for (;;) {
        int64_t t1, t23[2];
        recv_yielding(&t1, 1, child);
        if (t1 == STOP)
            break;
        t23[0] = mg_clock_ns();
        t23[1] = mg_clock_ns();
        send_yielding(t23, 2, child);
    }
}

/* Whether to try another exchange after `done` of them, `elapsed_ns` since the first. */
static int want_more(int done, int64_t best_rtt_ns, int64_t elapsed_ns)
{
    if (done < MIN_PINGPONGS)
        return 1;
    if (done >= MAX_PINGPONGS || elapsed_ns >= MAX_WINDOW_NS)
        return 0;
    return done < PINGPONGS || best_rtt_ns > TARGET_RTT_NS;
}

static void measure_parent(int parent, mg_sync *s)
{
    s->rtt_ns = INT64_MAX;
    int64_t begin = mg_monotonic_ns();
    for (int i = 0; want_more(i, s->rtt_ns, mg_monotonic_ns() - begin); i++) {
        int64_t t1 = mg_clock_ns(), t23[2];
        send_yielding(&t1, 1, parent);
        recv_yielding(t23, 2, parent);
        int64_t t4 = mg_clock_ns();
        int64_t rtt = (t4 - t1) - (t23[1] - t23[0]);
        if (rtt < s->rtt_ns) {
            s->rtt_ns = rtt;
            s->offset_ns = ((t1 - t23[0]) + (t4 - t23[1])) / 2;
            s->local_ns = t1 + (t4 - t1) / 2;
        }
    }
    int64_t stop = STOP;
    send_yielding(&stop, 1, parent);
}

void mg_sync_measure(mg_sync *s)
{
    int r = mg.world_rank, size = mg.world_size;
    memset(s, 0, sizeof *s);
    if (r == 0)
        s->local_ns = mg_clock_ns(); /* the reference: offset 0 */
    for (int step = 1; step < size; step <<= 1) {
        if (r % (2 * step) == step)
            measure_parent(r - step, s);
        else if (r % (2 * step) == 0 && r + step < size)
            serve_child(r + step);
    }
    for (int i = 0; i < MG_N_BARRIER_SAMPLES; i++) {
        MPI_Request request;
        s->barrier_ns[i][0] = mg_clock_ns();
        PMPI_Ibarrier(sync_comm, &request);
        wait_yielding(&request);
        s->barrier_ns[i][1] = mg_clock_ns();
    }
}

void mg_sync_finish(void)
{
    if (sync_comm != MPI_COMM_NULL)
        PMPI_Comm_free(&sync_comm);
}

/* ---- did every rank reach MPI_Finalize? ------------------------------------
 *
 * The Finalize-time samples and the analysis are collective: one rank that
 * never arrives (hung, or killed without the job going down) would block the
 * others forever.  So before them, every rank tells rank 0 it has arrived;
 * rank 0 waits up to MPIGRAPH_FINALIZE_TIMEOUT seconds (default 600, 0 or
 * "off": forever) and answers each arrived rank whether all did.  Waiting is
 * a Test poll with 1 ms sleeps, so waiting ranks leave the cores alone. */

static double finalize_timeout_s(void)
{
    const char *v = getenv("MPIGRAPH_FINALIZE_TIMEOUT");
    if (!v || !*v)
        return DEFAULT_FINALIZE_TIMEOUT_S;
    if (!strcasecmp(v, "off"))
        return 0;
    char *end;
    double s = strtod(v, &end);
    if (*end || !(s >= 0)) {
        mg_say("rank %d: MPIGRAPH_FINALIZE_TIMEOUT=%s is not a number of seconds; using %g",
            mg.world_rank, v, DEFAULT_FINALIZE_TIMEOUT_S);
        return DEFAULT_FINALIZE_TIMEOUT_S;
    }
    return s;
}

/* Between polls: nothing for the first 100, then sleeps of 10 us doubling up
 * to 1 ms.  Ranks usually arrive within microseconds of each other: a fixed
 * 1 ms sleep would add a millisecond to every wait of every run; a rank that arrives much later
 * still finds the others asleep, not spinning on a core it may need. */
static void nap(int polls)
{
    if (polls < 100)
        return;
    int doublings = polls - 100;
    struct timespec ts = {0, doublings >= 7 ? 1000000 : 10000L << doublings};
    nanosleep(&ts, NULL);
}

static int past(int64_t deadline, double timeout_s)
{
    return timeout_s > 0 && mg_monotonic_ns() > deadline;
}

/* "1, 4-6" into buf: the ranks > 0 with arrived[r] == 0. */
static void missing_ranks(const char *arrived, int size, char *buf, size_t len)
{
    size_t used = 0;
    buf[0] = '\0';
    for (int r = 1; r < size && used + 24 < len; r++) {
        if (arrived[r])
            continue;
        int last = r;
        while (last + 1 < size && !arrived[last + 1])
            last++;
        used += snprintf(buf + used, len - used, "%s%d", used ? ", " : "", r);
        if (last > r)
            used += snprintf(buf + used, len - used, "-%d", last);
        r = last;
    }
}

/* Rank 0 receives the arrival messages with Iprobe + Recv, so nothing is
 * left posted when it gives up: a late rank's message is simply never read. */
static int rank0_collect_arrivals(double timeout_s)
{
    int size = mg.world_size, count = 1;
    char *arrived = calloc((size_t)size, 1);
    if (!arrived)
        return 0;
    arrived[0] = 1;
    int64_t deadline = mg_monotonic_ns() + (int64_t)(timeout_s * 1e9);
    for (int polls = 0; count < size && !past(deadline, timeout_s); polls++) {
        int flag = 0, dummy;
        MPI_Status st;
        PMPI_Iprobe(MPI_ANY_SOURCE, TAG_ARRIVED, sync_comm, &flag, &st);
        if (flag) {
            PMPI_Recv(&dummy, 1, MPI_INT, st.MPI_SOURCE, TAG_ARRIVED, sync_comm, MPI_STATUS_IGNORE);
            count += !arrived[st.MPI_SOURCE];
            arrived[st.MPI_SOURCE] = 1;
            polls = 0;
        } else
            nap(polls);
    }
    int all = count == size;
    if (!all) {
        char list[1024];
        missing_ranks(arrived, size, list, sizeof list);
        mg_say("rank%s %s did not reach MPI_Finalize within %g s (MPIGRAPH_FINALIZE_TIMEOUT): no analysis in "
               "the job; the raw logs are in %s (once the job is over: mpigraph analyze %s)",
            size - count > 1 ? "s" : "", list, timeout_s, mpigraph_run_dir(), mpigraph_run_dir());
    }
    for (int r = 1; r < size; r++)
        if (arrived[r])
            PMPI_Send(&all, 1, MPI_INT, r, TAG_VERDICT, sync_comm);
    free(arrived);
    return all;
}

static int await_verdict(double timeout_s)
{
    int arrived = 1, all = 0, sent = 0, answered = 0;
    MPI_Request send;
    PMPI_Isend(&arrived, 1, MPI_INT, 0, TAG_ARRIVED, sync_comm, &send);
    /* Rank 0 answers at its own deadline at the latest: allow for it to arrive late by as much. */
    double limit_s = timeout_s > 0 ? 2 * timeout_s + 5 : 0;
    int64_t deadline = mg_monotonic_ns() + (int64_t)(limit_s * 1e9);
    for (int polls = 0; !(sent && answered) && !past(deadline, limit_s); polls++) {
        if (!sent)
            PMPI_Test(&send, &sent, MPI_STATUS_IGNORE);
        if (!answered)
            PMPI_Iprobe(0, TAG_VERDICT, sync_comm, &answered, MPI_STATUS_IGNORE);
        nap(polls);
    }
    if (answered) {
        PMPI_Recv(&all, 1, MPI_INT, 0, TAG_VERDICT, sync_comm, MPI_STATUS_IGNORE);
        if (!sent)
            PMPI_Wait(&send, MPI_STATUS_IGNORE); /* rank 0 answered: it has received it */
        return all;
    }
    mg_say("rank %d: no answer from rank 0 within %g s of reaching MPI_Finalize (MPIGRAPH_FINALIZE_TIMEOUT): "
           "no analysis in the job; the raw logs are in %s", mg.world_rank, limit_s, mpigraph_run_dir());
    return 0;
}

int mg_sync_all_arrived(void)
{
    double timeout_s = finalize_timeout_s();
    if (mg.world_size == 1)
        return 1;
    return mg.world_rank == 0 ? rank0_collect_arrivals(timeout_s) : await_verdict(timeout_s);
}
