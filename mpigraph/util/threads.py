"""Threads for work that lets go of the GIL (pyarrow's kernels and writers), and their stand-in
where no thread can start."""

from concurrent.futures import Executor, Future


def pool(workers, name):
    """A ThreadPoolExecutor of `workers` threads named `name`-N or, where none can start, an
    executor that makes each call at once on the calling thread (``Inline``).

    No thread can start once the interpreter has begun to exit, and that is where an mpi4py
    program's MPI_Finalize, and so its in-job analysis, runs: at exit."""
    try:
        from concurrent.futures import ThreadPoolExecutor     # registers an exit hook: fails then

        executor = ThreadPoolExecutor(workers, thread_name_prefix=name)
        executor.submit(int).result()         # refuses new work then
        return executor
    except RuntimeError:
        return Inline()


class Inline(Executor):
    """An executor that makes each call when it is submitted, on the calling thread."""

    def submit(self, fn, /, *args, **kwargs):
        return done_here(fn, *args, **kwargs)


def done_here(function, *args, **kwargs):
    """A finished Future of function(*args, **kwargs), called on this thread."""
    done = Future()
    try:
        done.set_result(function(*args, **kwargs))
    except Exception as e:
        done.set_exception(e)
    return done
