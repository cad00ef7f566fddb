/* mpigraph shim: MPI_Init and MPI_Finalize, and the hand-over to Python.
 *
 * The other parts: pmpi.c (binding to the program's MPI), logfile.c (clock
 * and log file), comms.c (communicators), requests.c (requests, Wait/Test),
 * clock_sync.c (clock offset samples), and wrappers.c, generated from
 * mpigraph/trace/functions.py by generate.py.
 *
 * Rules: never break the program (any failure turns recording off and says
 * so once on stderr), never analyse (Python does that), keep the wrapper hot
 * path to a flag test, two clock reads and one record store. */
#define _GNU_SOURCE
#include <Python.h>

#include <dlfcn.h>
#include <stdarg.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "shim.h"

/* Entry points into Python, defined by cffi's embedding (see setup.py). */
extern int mpigraph_py_finalize(const char *run_dir);
extern int mpigraph_py_register_atexit(void);

struct mg_state mg = {.fd = -1};
__thread int mg_depth __attribute__((tls_model("initial-exec")));
__thread int32_t mg_thread_slot __attribute__((tls_model("initial-exec"))) = -1;

/* Life cycle of the shim in this process. */
enum { MG_OFF, MG_RECORDING, MG_CLOSED, MG_ANALYSED };
static int mg_phase = MG_OFF;
static int mg_analyze = 1;       /* MPIGRAPH_ANALYZE */
static int mg_python_host;       /* the program itself is a Python interpreter */
static char mg_run_dir[PATH_MAX];
static int mg_finalize_called; /* mg_finalize_handover ran (MPI_Finalize, C or Fortran) */
static int32_t mg_next_thread_slot = 1;
static int mg_analysis_ranks; /* how many world ranks analyse the run (analysis_ranks.c) */
static int *mg_analysis_list; /* they, in world rank order */

/* One line on stderr, written at once: stderr is unbuffered, and the ranks' lines written in
 * pieces came out mixed with each other's ("mpigraph: mpigraph: error: ..."). */
void mg_say(const char *fmt, ...)
{
    char line[8192] = "mpigraph: ";
    size_t prefix = strlen(line);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line + prefix, sizeof line - prefix - 1, fmt, ap); /* one byte kept for the newline */
    va_end(ap);
    size_t end = strlen(line);
    line[end] = '\n';
    line[end + 1] = '\0';
    fputs(line, stderr);
}

/* ---- Init: agree on a run directory, open the log --------------------------- */

void mg_lock(void) { pthread_mutex_lock(&mg.lock); }
void mg_unlock(void) { pthread_mutex_unlock(&mg.lock); }

static int env_is_off(const char *name)
{
    const char *v = getenv(name);
    return v && (!strcmp(v, "0") || !strcasecmp(v, "off") || !strcasecmp(v, "no") || !strcasecmp(v, "false"));
}

static void mg_choose_poll_gap(void);

void mg_start_recording(int func, int64_t t0, int provided)
{
    if (env_is_off("MPIGRAPH_RECORD"))
        return;
    mg_analyze = !env_is_off("MPIGRAPH_ANALYZE");
    PMPI_Comm_rank(MPI_COMM_WORLD, &mg.world_rank);
    PMPI_Comm_size(MPI_COMM_WORLD, &mg.world_size);

    struct mg_run_setup setup = {0};
    if (mg.world_rank == 0)
        mg_prepare_run_dir(&setup);
    PMPI_Bcast(&setup, sizeof setup, MPI_BYTE, 0, MPI_COMM_WORLD);
    char err[PATH_MAX + 600] = "";
    if (setup.error[0])
        snprintf(err, sizeof err, "%s", setup.error);
    else
        mg_open_log(&setup, provided, err, sizeof err);
    /* Record on every rank or on none: a partial set of logs is no report. */
    int ok = err[0] == '\0', all_ok = 0;
    PMPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (!all_ok) {
        /* A directory problem is the same on every rank: say it once. */
        if (!ok && (!setup.error[0] || mg.world_rank == 0))
            mg_say("rank %d: %s; the program runs on without profiling", mg.world_rank, err);
        mg_discard_log(&setup);
        return;
    }
    snprintf(mg_run_dir, sizeof mg_run_dir, "%s", setup.dir);
    mg.threaded = provided >= MPI_THREAD_SERIALIZED;
    pthread_mutexattr_t attr;
    pthread_mutexattr_init(&attr);
    pthread_mutexattr_settype(&attr, PTHREAD_MUTEX_RECURSIVE);
    pthread_mutex_init(&mg.lock, &attr);
    mg_thread_slot = 0;
    mg_types_setup();
    mg_comms_setup();
    mg_gpu_setup();
    /* Collective, so every rank asks, whatever its MPIGRAPH_LOG_HELPER says. */
    int spare_cpu = mg_rank_has_spare_cpu();
    mg_sync_setup();
    mg_sync_measure(&mg.header->sync_init);

    mg_calibrate(MG_CALIB_INIT_A);
    /* A second calibration pair a millisecond later, so a log that never
     * reaches MPI_Finalize can still convert ticks to ns. */
    int64_t until = mg_monotonic_ns() + 1000000;
    while (mg_monotonic_ns() < until)
        ;
    mg_calibrate(MG_CALIB_INIT_B);
    mg_choose_poll_gap();

    /* mpi4py finalises MPI after the interpreter is gone: analyse at exit instead. */
    mg_python_host = Py_IsInitialized();
    if (mg_python_host && mg_analyze && mpigraph_py_register_atexit() != 1)
        mg_say("rank %d: cannot load mpigraph in this Python; raw logs will be left in %s", mg.world_rank,
            mg_run_dir);

    /* After the clock samples above: its work would disturb them. */
    mg_start_log_helper(spare_cpu);
    /* The program sees MPI_Init return only now: its record ends here, so the
     * shim's own start-up (the helper thread's creation included) is not taken
     * for the program's work. */
    mg_record *r = mg_reserve(1);
    mg_fill(r, func, t0, mg_now(), 0);
    mg_publish(1);
    mg_phase = MG_RECORDING;
    mg.recording = 1;
}

/* MPIGRAPH_POLL_GAP_NS (default 1000): unsuccessful polls of the same arguments closer than this
 * share one record (shim.h: mg_poll_repeat); 0 turns the merging off.  A program polling with
 * no work between its polls leaves gaps of tens of ns; a microsecond keeps a poll loop that
 * does real work between its polls (or is preempted) on separate records, so that work stays compute. */
static void mg_choose_poll_gap(void)
{
    const char *want = getenv("MPIGRAPH_POLL_GAP_NS");
    double gap_ns = want && *want ? atof(want) : 1000.0;
    const mg_header *h = mg.header;
    double ns = (double)(h->calib_ns[MG_CALIB_INIT_B] - h->calib_ns[MG_CALIB_INIT_A]);
    double ticks = (double)(h->calib_ticks[MG_CALIB_INIT_B] - h->calib_ticks[MG_CALIB_INIT_A]);
    mg.poll_gap_ticks = gap_ns > 0 && ns > 0 ? (int64_t)(gap_ns * ticks / ns) : 0;
    mg.poll_index = -1;
}

/* MPI_Abort: a record (tag: the error code) and the header's mark, written before the call,
 * which does not return: the report names the rank that aborted. */
int MPI_Abort(MPI_Comm comm, int errorcode)
{
    if (!mg_should_record())
        return PMPI_Abort(comm, errorcode);
    mg_depth++;
    mg_comm *c = mg_comm_of(comm);
    int64_t t0 = mg_now();
    mg.header->abort_code = errorcode;
    mg.header->flags |= MG_HEADER_ABORTED;
    mg_record *r = mg_reserve(1);
    if (r) {
        mg_fill(r, MG_ID_MPI_Abort, t0, t0, 0);
        r->comm = c->id;
        r->tag = errorcode;
        mg_publish(1);
    }
    mg_write_sites(mg_run_dir, mg.world_rank); /* the process ends in the call */
    int fl = mg_begin(MG_ID_MPI_Abort, t0, MG_PEER_NONE, errorcode, c->id, 0, MG_ROOT_NONE, 0);
    int rc = PMPI_Abort(comm, errorcode);
    mg_end(fl);
    mg_depth--;
    return rc;
}

/* Threads other than the first get their slot when they first log. */
void mg_assign_thread_slot(void)
{
    if (mg_thread_slot < 0)
        mg_thread_slot = __atomic_fetch_add(&mg_next_thread_slot, 1, __ATOMIC_RELAXED);
}

/* Inside another wrapper (a Fortran binding's Init) the outer wrapper records. */
int MPI_Init(int *argc, char ***argv)
{
    if (mg_depth)
        return PMPI_Init(argc, argv);
    mg_sites_setup_once();
    MG_SITE();
    mg_choose_clock();
    int64_t t0 = mg_now();
    int rc = PMPI_Init(argc, argv);
    if (rc == MPI_SUCCESS)
        mg_start_recording(MG_ID_MPI_Init, t0, MPI_THREAD_SINGLE);
    return rc;
}

int MPI_Init_thread(int *argc, char ***argv, int required, int *provided)
{
    if (mg_depth)
        return PMPI_Init_thread(argc, argv, required, provided);
    mg_sites_setup_once();
    MG_SITE();
    mg_choose_clock();
    int64_t t0 = mg_now();
    int rc = PMPI_Init_thread(argc, argv, required, provided);
    if (rc == MPI_SUCCESS)
        mg_start_recording(MG_ID_MPI_Init_thread, t0, *provided);
    return rc;
}

/* ---- Finalize: close the log, hand over to Python ------------------------------ */

/* A symbol of the MPI library's tool interface: its PMPI_T_ name, else its MPI_T_ one. */
static void *mpi_t_symbol(const char *name)
{
    char pmpi[64];
    snprintf(pmpi, sizeof pmpi, "P%s", name);
    void *f = mg_mpi_symbol(pmpi);
    return f ? f : mg_mpi_symbol(name);
}

/* Let MPI_Finalize return without waiting for the other ranks, where the MPI can: the ranks that
 * do not analyse then leave it at once, while the analysis ranks analyse.  MPICH's MPI_Finalize is
 * collective (it ends with a barrier over MPI_COMM_WORLD), so they would wait there for the whole
 * analysis; its control variable MPIR_CVAR_NO_COLLECTIVE_FINALIZE makes it local.  The variable
 * must be the same on every rank (set on the ones that leave only, the analysis ranks' own
 * MPI_Finalize waits for them for ever), so every rank sets it here.  Safe at this point: every
 * rank has completed its communication (the Allreduce of choose_analysis_ranks came after it),
 * and the analysis ranks talk only among themselves.  An MPI without the variable (Open MPI)
 * keeps its collective MPI_Finalize: nothing changes. */
static void finalize_locally(void)
{
    __typeof__(MPI_T_init_thread) *t_init = mpi_t_symbol("MPI_T_init_thread");
    __typeof__(MPI_T_finalize) *t_finalize = mpi_t_symbol("MPI_T_finalize");
    __typeof__(MPI_T_cvar_get_index) *get_index = mpi_t_symbol("MPI_T_cvar_get_index");
    __typeof__(MPI_T_cvar_handle_alloc) *handle_alloc = mpi_t_symbol("MPI_T_cvar_handle_alloc");
    __typeof__(MPI_T_cvar_write) *cvar_write = mpi_t_symbol("MPI_T_cvar_write");
    __typeof__(MPI_T_cvar_handle_free) *handle_free = mpi_t_symbol("MPI_T_cvar_handle_free");
    int provided, index, count, one = 1;
    MPI_T_cvar_handle handle;
    if (!t_init || !t_finalize || !get_index || !handle_alloc || !cvar_write || !handle_free
        || t_init(MPI_THREAD_SINGLE, &provided) != MPI_SUCCESS)
        return;
    if (get_index("MPIR_CVAR_NO_COLLECTIVE_FINALIZE", &index) == MPI_SUCCESS
        && handle_alloc(index, NULL, &handle, &count) == MPI_SUCCESS) {
        if (count == 1)
            cvar_write(handle, &one);
        handle_free(&handle);
    }
    t_finalize();
}

/* Every rank here (they all arrived) and its log closed: which ranks analyse the run, from its
 * records and the nodes' CPUs (analysis_ranks.c); the others do not.  The Allreduce also makes
 * sure every log is closed before an analysis rank reads it. */
static void choose_analysis_ranks(void)
{
    long long mine = mg.n, total = 0;
    PMPI_Allreduce(&mine, &total, 1, MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
    mg_analysis_list = mg_choose_analysis_ranks(total, &mg_analysis_ranks);
    if (mg_analysis_ranks < mg.world_size)
        finalize_locally();
    int analyses = 0;
    for (int i = 0; i < mg_analysis_ranks; i++)
        analyses |= mg_analysis_list[i] == mg.world_rank;
    if (!analyses)
        mg_analyze = 0;
}

/* Stop recording and close the log with a Finalize record; 1 if this call did it. */
int mpigraph_close_log(void)
{
    if (mg_phase != MG_RECORDING)
        return 0;
    int64_t t = mg_now();
    /* Closed at exit (mpi4py), not in MPI_Finalize: no call site of the program's. */
    if (!mg_finalize_called)
        mg_site = 0;
    mg_record *r = mg_reserve(1);
    if (r) {
        mg_fill(r, MG_ID_MPI_Finalize, t, t, 0);
        mg_publish(1);
    }
    mg.recording = 0;
    mg_stop_log_helper(); /* before the clock samples, which it would disturb */
    /* MPI finalised without the wrapper (a Python host whose MPI_Finalize was bound past the
     * shim): nothing collective may run now, and an analysis would abort in the MPI library. */
    int finalized = 0;
    PMPI_Finalized(&finalized);
    if (finalized) {
        mg_say("rank %d: MPI was finalised before mpigraph closed the log (MPI_Finalize did not go "
            "through the shim); the log is kept unanalysed in %s (run: mpigraph analyze %s)",
            mg.world_rank, mg_run_dir, mg_run_dir);
        mg_analyze = 0;
        mg_close_log_file();
        mg_phase = MG_CLOSED;
        return 1;
    }
    /* The samples and the analysis are collective: only if every rank is here. */
    if (mg_sync_all_arrived())
        mg_sync_measure(&mg.header->sync_final);
    else
        mg_analyze = 0;
    mg_sync_finish();
    mg_close_log_file();
    mg_write_sites(mg_run_dir, mg.world_rank);
    mg_phase = MG_CLOSED;
    if (mg_analyze)
        choose_analysis_ranks();
    return 1;
}

const char *mpigraph_run_dir(void) { return mg_run_dir; }
int mpigraph_analysis_ranks(void) { return mg_analysis_ranks; }
int mpigraph_analysis_rank(int i) { return i >= 0 && i < mg_analysis_ranks ? mg_analysis_list[i] : -1; }
int mpigraph_analysis_wanted(void) { return mg_analyze && mg_phase == MG_CLOSED; }
void mpigraph_mark_analysed(void) { mg_phase = MG_ANALYSED; }

/* The Python of the environment mpigraph is installed in: MPIGRAPH_PYTHON; else, where this
 * library is <prefix>/lib/pythonX.Y/site-packages/mpigraph/ (an installed, perhaps relocated
 * environment), <prefix>/bin/python3; else the Python that built it (an editable install in a
 * source tree).  A virtual environment's own python, not the base interpreter it links to, so
 * that the analysis imports the environment's packages. */
static void find_python(char *out, size_t len)
{
    const char *forced = getenv("MPIGRAPH_PYTHON");
    if (forced && *forced) {
        snprintf(out, len, "%s", forced);
        return;
    }
    Dl_info info;
    char path[PATH_MAX];
    if (dladdr((void *)find_python, &info) && info.dli_fname && realpath(info.dli_fname, path)) {
        char *dirs[5] = {0};
        for (int up = 0; up < 5; up++) {
            dirs[up] = strrchr(path, '/');
            if (!dirs[up])
                break;
            *dirs[up] = '\0';
        }
        /* dirs[1] + 1 is the name of the folder that holds the package */
        int installed = dirs[4] && (strcmp(dirs[1] + 1, "site-packages") == 0
                                    || strcmp(dirs[1] + 1, "dist-packages") == 0);
        if (installed) {
            snprintf(out, len, "%s/bin/python3", path);
            if (access(out, X_OK) == 0)
                return;
        }
    }
    snprintf(out, len, "%s", MG_BUILD_PYTHON);
}

static int start_python(void)
{
    if (Py_IsInitialized())
        return 0;
    char program[PATH_MAX];
    find_python(program, sizeof program);
    PyConfig config;
    PyConfig_InitPythonConfig(&config);
    config.install_signal_handlers = 0; /* the program's handlers stay */
    config.parse_argv = 0;
    PyStatus status = PyConfig_SetBytesString(&config, &config.program_name, program);
    if (!PyStatus_Exception(status))
        status = Py_InitializeFromConfig(&config);
    PyConfig_Clear(&config);
    if (PyStatus_Exception(status)) {
        mg_say("rank %d: cannot start Python (%s): %s", mg.world_rank, program,
            status.err_msg ? status.err_msg : "unknown error");
        return -1;
    }
    PyEval_SaveThread(); /* cffi takes the GIL itself for each call */
    return 0;
}

static void analyse_in_job(void)
{
    fflush(NULL); /* the program's buffered output comes before the report's */
    int ok = start_python() == 0 && mpigraph_py_finalize(mg_run_dir) == 1;
    mg_phase = MG_ANALYSED;
    if (!ok)
        mg_say("rank %d: the analysis did not complete; raw logs are in %s (run: mpigraph analyze %s)",
            mg.world_rank, mg_run_dir, mg_run_dir);
}

/* Close the log and analyse, before the MPI library is finalised. */
void mg_finalize_handover(void)
{
    mg_finalize_called = 1;
    if (mpigraph_close_log() && mg_analyze) {
        /* A Python program that calls MPI_Finalize itself is analysed here,
         * while its interpreter is alive; after interpreter shutdown only the
         * atexit hook could have done it. */
        if (!mg_python_host || Py_IsInitialized())
            analyse_in_job();
    }
}

int MPI_Finalize(void)
{
    if (!mg_depth) {
        MG_SITE();
        mg_finalize_handover();
    }
    return PMPI_Finalize();
}
