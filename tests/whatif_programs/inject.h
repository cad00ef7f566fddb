/* Test-program latency injector for validating `mpigraph whatif` (a TEST SETTING, never used
 * by mpigraph itself; seed 000's Fig. 8 and spec whatif.md, "Local validation").
 *
 * WHATIF_INJECT_NS=dL (ns, default 0: off) and WHATIF_BASE_NS=b (ns): the receiver of a message
 * holds its completion, by busy-spinning after the receive completed, until the message's send
 * start (carried in the payload's first 8 bytes, CLOCK_MONOTONIC, the same clock for every
 * process of a host) plus b plus dL.  b is the delivery time at dL = 0, measured beforehand by
 * the harness: the message is held until it would have arrived with dL more network latency.
 * The sender is never delayed: two back-to-back sends pay dL once each in parallel, not 2 dL
 * (the paper's Fig. 8).  With dL = 0 nothing is held: the traced run is the plain program. */
#ifndef WHATIF_INJECT_H
#define WHATIF_INJECT_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <time.h>

static int64_t wi_dl = 0, wi_base = 0;
/* The program's own measure of its run time (WHATIF_REPORT=1): CLOCK_MONOTONIC when MPI_Init
 * returned (wi_init, first thing) and when MPI_Finalize is called (wi_finish), printed after
 * MPI_Finalize (wi_report), outside the measured interval.  The harness takes the earliest
 * start and the latest end over the ranks: the definition of T that mpigraph uses on a trace
 * (earliest end of MPI_Init to the latest start of MPI_Finalize), measured without the shim. */
static int64_t wi_t_init = 0, wi_t_finish = 0;
static int wi_rank_seen = -1;

static int64_t wi_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* WHATIF_YIELD=1 (for a shared, oversubscribed machine): sleep through the first part of a
 * long hold instead of spinning, with the timer slack at 1 us, so that a rank waiting for
 * the network leaves its core to whoever needs it (pair with MPICH's progress throttle). */
static int wi_yield = 0;
#define WI_SPIN_NS 30000     /* the last part of a hold is always spun: a sleep wakes late */

static int64_t wi_now(void);

static void wi_init(void)
{
    wi_t_init = wi_now();
    const char *dl = getenv("WHATIF_INJECT_NS"), *base = getenv("WHATIF_BASE_NS");
    const char *yield = getenv("WHATIF_YIELD");
    wi_dl = dl ? atoll(dl) : 0;
    wi_base = base ? atoll(base) : 0;
    wi_yield = yield && atoi(yield);
    if (wi_yield)
        prctl(PR_SET_TIMERSLACK, 1000UL, 0, 0, 0);
}

/* Call right before MPI_Finalize. */
static void wi_finish(int rank)
{
    wi_t_finish = wi_now();
    wi_rank_seen = rank;
}

/* Call after MPI_Finalize: one line per rank, "WHATIF_T <rank> <init end ns> <finalize start ns>". */
static void wi_report(void)
{
    const char *want = getenv("WHATIF_REPORT");
    if (want && atoi(want))
        printf("WHATIF_T %d %lld %lld\n", wi_rank_seen, (long long)wi_t_init, (long long)wi_t_finish);
}

/* Stamp the send start into the payload. */
static void wi_stamp(void *buf)
{
    int64_t t = wi_now();
    memcpy(buf, &t, sizeof t);
}

/* Hold a completed receive until its send's start + base + dL. */
static void wi_hold_until_sent_plus(int64_t t_send)
{
    if (wi_dl <= 0)
        return;
    int64_t until = t_send + wi_base + wi_dl;
    if (wi_yield && until - wi_now() > 2 * WI_SPIN_NS) {
        int64_t wake = until - WI_SPIN_NS;
        struct timespec ts = {wake / 1000000000LL, wake % 1000000000LL};
        clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL);
    }
    while (wi_now() < until)
        ;
}

static void wi_hold(const void *buf)
{
    int64_t t_send;
    memcpy(&t_send, buf, sizeof t_send);
    wi_hold_until_sent_plus(t_send);
}

/* Compute for `ns` of wall time (a busy loop: the rank keeps its core, as a computation would;
 * wall time, not a work count, so a descheduled rank still computes as long). */
static double wi_compute(int64_t ns)
{
    volatile double x = 0;
    int64_t until = wi_now() + ns;
    while (wi_now() < until)
        x += 1.0;
    return x;
}

#endif
