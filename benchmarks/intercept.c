/* Cost of one intercepted MPI call: run bare and under the shim by
 * benchmarks/bench_intercept.py.  Prints
 * "<case> <wall ns per call> <thread CPU ns per call> <process CPU ns per call>"
 * lines; the CPU time (this thread's, user + kernel) is what a busy machine
 * disturbs least, since time spent preempted does not count.  The process's
 * CPU time also counts the work of any helper thread of the shim (pre-faulting
 * the log), which the calling thread's figure would hide.
 *   iprobe:   MPI_Iprobe on MPI_COMM_SELF (nothing to find): the cheapest call
 *   sendrecv: a 0-byte MPI_Sendrecv to itself on MPI_COMM_SELF: one message */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

static double clock_s(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

static double cpu_now(void) { return clock_s(CLOCK_THREAD_CPUTIME_ID); }
static double proc_now(void) { return clock_s(CLOCK_PROCESS_CPUTIME_ID); }

int main(int argc, char **argv)
{
    long n = argc > 1 ? atol(argv[1]) : 1000000;
    int flag;
    MPI_Init(&argc, &argv);
    for (long i = 0; i < n / 10; i++) /* warm up caches and the log's first pages */
        MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_SELF, &flag, MPI_STATUS_IGNORE);
    double t0 = now(), c0 = cpu_now(), p0 = proc_now();
    for (long i = 0; i < n; i++)
        MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_SELF, &flag, MPI_STATUS_IGNORE);
    double t1 = now(), c1 = cpu_now(), p1 = proc_now();
    printf("iprobe %.2f %.2f %.2f\n", (t1 - t0) / n * 1e9, (c1 - c0) / n * 1e9, (p1 - p0) / n * 1e9);
    long m = n / 4;
    t0 = now(), c0 = cpu_now(), p0 = proc_now();
    for (long i = 0; i < m; i++)
        MPI_Sendrecv(NULL, 0, MPI_BYTE, 0, 1, NULL, 0, MPI_BYTE, 0, 1, MPI_COMM_SELF, MPI_STATUS_IGNORE);
    t1 = now(), c1 = cpu_now(), p1 = proc_now();
    printf("sendrecv %.2f %.2f %.2f\n", (t1 - t0) / m * 1e9, (c1 - c0) / m * 1e9, (p1 - p0) / m * 1e9);
    MPI_Finalize();
    return 0;
}
