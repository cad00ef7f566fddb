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


def memory_gib():
    try:
        with open("/proc/meminfo") as f:
            return int(next(line.split()[1] for line in f if line.startswith("MemTotal:"))) / 2**20
    except (OSError, StopIteration):
        return float("nan")


def describe_machine():
    import numpy

    load = "%.2f %.2f %.2f" % os.getloadavg() if hasattr(os, "getloadavg") else "?"
    return ("machine: %s, %d cores, %.0f GiB RAM, %s, Python %s, numpy %s; %s; load average %s"
            % (cpu_model(), os.cpu_count(), memory_gib(), platform.platform(), platform.python_version(),
               numpy.__version__, datetime.datetime.now().strftime("%Y-%m-%d %H:%M"), load))
