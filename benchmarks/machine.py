"""One line describing the machine and the moment a benchmark ran, printed by every benchmark."""

import datetime
import os
import platform


def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            return next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
    except (OSError, StopIteration):
        return platform.processor() or "unknown"


def memory_gib(field="MemTotal"):
    """A /proc/meminfo field in GiB (MemTotal, MemAvailable, ...); nan where unknown."""
    try:
        with open("/proc/meminfo") as f:
            return int(next(line.split()[1] for line in f if line.startswith(field + ":"))) / 2**20
    except (OSError, StopIteration):
        return float("nan")


def describe_machine():
    import numpy

    load = "%.2f %.2f %.2f" % os.getloadavg() if hasattr(os, "getloadavg") else "?"
    return ("machine: %s, %d cores, %.0f GiB RAM, %s, Python %s, numpy %s; %s; load average %s"
            % (cpu_model(), os.cpu_count(), memory_gib(), platform.platform(), platform.python_version(),
               numpy.__version__, datetime.datetime.now().strftime("%Y-%m-%d %H:%M"), load))


def fresh_memory_rates(gib=1.0, idle_s=5.0):
    """(GB/s writing memory new to the process after `idle_s` seconds, GB/s writing it again at once).

    On bare metal the two are close (the kernel zeroes a page on first touch).  On a VM whose
    guest hands freed memory back to the host (virtio-balloon free page reporting) the host
    must back every fresh page again, and the first rate is
    many times lower: an analysis pays it for every byte its peak memory grows by.
    """
    import time

    import numpy

    rates = []
    for pause in (idle_s, 0.0):
        time.sleep(pause)         # long enough for the guest to report the freed pages
        started = time.perf_counter()
        block = numpy.ones(int(gib * 2**30) // 8, numpy.int64)
        rates.append(block.nbytes / (time.perf_counter() - started) / 1e9)
        del block
    return tuple(rates)


def describe_memory():
    fresh, again = fresh_memory_rates()
    return ("memory: %.1f GB/s writing 1 GiB new to the process after 5 s idle, %.1f GB/s writing it again at once"
            % (fresh, again))


def compile_mpigraph():
    """Byte-compile mpigraph's modules, as pip does when it installs the package; returns a line
    saying so.  A source tree run with PYTHONDONTWRITEBYTECODE set, or never imported before,
    compiles every module an analysis imports, in every analysis and on every rank: a stage
    that imports its modules pays for it (the path stage, 0.07-0.13 s of CPU on the 2-core
    machine), at every K alike, which a user's installed mpigraph does not."""
    import compileall

    import mpigraph

    where = os.path.dirname(mpigraph.__file__)
    ok = compileall.compile_dir(where, quiet=1)
    return "mpigraph's modules byte-compiled first, as an installed package's are: %s%s" % (
        where, "" if ok else " (some failed to compile: their stages compile them in every run)")
