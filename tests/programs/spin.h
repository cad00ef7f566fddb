/* Busy compute for the test programs: a spin on clock_gettime, no MPI call inside and no
 * sleep, so that a rank that "computes" holds its core the whole time, as real compute does
 * (a sleeping rank would let an oversubscribed machine run the others meanwhile).
 *
 * Each spin returns x advanced by the loop: the caller keeps it live (prints or stores it),
 * so the compiler cannot drop the loop.  Included by several programs: static inline. */
#ifndef MPIGRAPH_TEST_SPIN_H
#define MPIGRAPH_TEST_SPIN_H

#include <time.h>

/* CLOCK_MONOTONIC in seconds. */
static inline double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + 1e-9 * t.tv_nsec;
}

/* Computes until now() reaches `end` (seconds). */
static inline double spin_until(double end, double x)
{
    while (now() < end)
        x = x * 0.999999 + 1e-6;
    return x;
}

static inline double spin_ms(double ms, double x)
{
    return spin_until(now() + ms * 1e-3, x);
}

static inline double spin_us(double us, double x)
{
    return spin_until(now() + us * 1e-6, x);
}

#endif
