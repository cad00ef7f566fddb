"""Settings, read from MPIGRAPH_* environment variables.

Inside a profiled job the only way to pass settings to the analysis is the
environment (``mpigraph run`` and ``mpiexec -genv`` set it for every rank);
offline, ``mpigraph analyze`` reads the same variables and its options override
them.  ``SETTINGS`` is the one table of every variable, its default and its
meaning: ``mpigraph config`` prints it and the README copies it.

Some variables are read by the C shim only (``shim_only``): they are listed so
users find them in one place, but the analysis never looks at them.
"""

import dataclasses
import math
import os
from collections import namedtuple

from mpigraph.paths.algorithms import NAMES as ALGORITHMS  # noqa: F401  (the settings' choices)


class ConfigError(ValueError):
    """A setting has a value mpigraph does not accept; the message names the variable."""


CLOCK_METHODS = ("pingpong", "barrier", "none")
DEFAULT_COMPRESS_LEVEL = 3   # zstandard's own default level: fast, most of the gain

Setting = namedtuple("Setting", "name default help shim_only")

SETTINGS = [
    Setting("MPIGRAPH_OUT", "./mpigraph-<date>-<jobid>",
            "run directory: the raw logs go to <dir>/raw/, the report to <dir>/ (an existing one must be "
            "empty or hold raw/: other files are never written over)", False),
    Setting("MPIGRAPH_ANALYZE", "on",
            "on|off: analyse the run at MPI_Finalize (off: only write the raw logs)", False),
    Setting("MPIGRAPH_ALGORITHM", "auto",
            "critical-path algorithm: " + ", ".join(ALGORITHMS), False),
    Setting("MPIGRAPH_CLOCK", "pingpong",
            "cross-rank clock alignment: pingpong (offset and drift by ping-pong), "
            "barrier (barrier and median, the baseline), none (trust the clocks)", False),
    Setting("MPIGRAPH_THRESHOLD", "0",
            "seconds: compute gaps shorter than this merge the calls around them (0: keep all)", False),
    Setting("MPIGRAPH_SPLITS", "on",
            "on|off: split the graph at global synchronisation points and solve the pieces in parallel", False),
    Setting("MPIGRAPH_COMPRESS", "on",
            "off|on|1-22: zstandard level for data exchanged between analysis ranks (on = %d)"
            % DEFAULT_COMPRESS_LEVEL, False),
    Setting("MPIGRAPH_QUIET", "0", "1: print no summary at the end, and no progress unless verbose", False),
    Setting("MPIGRAPH_VERBOSE", "0",
            "1: print every analysis stage with its time on stderr (done anyway above 1e6 records "
            "unless quiet)", False),
    Setting("MPIGRAPH_PHASE", "(every phase)",
            "phases.csv, phase_functions.csv, phase_callsites.csv and the summary's phases section of this phase "
            "only: a region name (with the regions nested in it) or a Pcontrol phase number; the in-job twin of "
            "mpigraph analyze --phase NAME (an unknown name: the analysis fails, naming the run's phases)", False),
    Setting("MPIGRAPH_RECORD", "on", "on|off: record at all (off: the shim does nothing)", True),
    Setting("MPIGRAPH_CLOCK_SOURCE", "tsc if invariant",
            "tsc|monotonic: the clock the shim reads in every wrapper", True),
    Setting("MPIGRAPH_PYTHON", "the installing Python",
            "the Python interpreter the shim starts at MPI_Finalize of a C/Fortran program (trusted: it "
            "runs inside every rank)", True),
    Setting("MPIGRAPH_FINALIZE_TIMEOUT", "600",
            "seconds ranks in MPI_Finalize wait for the others before they skip the analysis and leave "
            "the raw logs (0 or off: forever)", True),
    Setting("MPIGRAPH_LOG_HELPER", "auto",
            "auto|on|off: a helper thread prepares the log's next pages ahead of the wrappers (less time "
            "per call when a core is idle, more CPU in all); auto: on where the rank has a CPU to spare "
            "(its affinity mask holds more CPUs than the threads of the node's ranks sharing that mask)", True),
    Setting("MPIGRAPH_POLL_GAP_NS", "1000",
            "ns: failed polls (MPI_Iprobe, MPI_Improbe, MPI_Test*) of the same arguments closer than this share "
            "one record with a count; the gaps merged count as MPI time (0: a record per call)", True),
    Setting("MPIGRAPH_ANALYSIS_RECORDS", "1000000",
            "records per analysis rank at MPI_Finalize: ceil(records / this) ranks analyse the run, at most "
            "one per CPU of a node (its ranks' affinity masks together), spread over the nodes; the others "
            "leave MPI_Finalize at once", True),
    Setting("MPIGRAPH_CALLSITE_DEPTH", "1",
            "frames per call site (callsites.csv): 1, the return address (a few ns per call); k up to 8, the "
            "call and k - 1 callers, found by unwinding the stack (about a microsecond per call)", True),
]

# Read by the launcher, the demo and the build of the shim (csrc/build.py), not by the analysis or
# the shim: listed so that `mpigraph config` names every variable mpigraph reads.
TOOL_SETTINGS = [
    Setting("MPIGRAPH_MPICC", "mpicc on PATH",
            "the MPI compiler wrapper: its headers build the shim at pip install, and mpigraph demo compiles "
            "with it (and runs the mpiexec beside it)", False),
    Setting("MPIGRAPH_MPIEXEC", "mpiexec on PATH",
            "the mpiexec that mpigraph run starts the program with (--mpiexec overrides it)", False),
]

_ON = ("on", "1", "yes", "true")
_OFF = ("off", "0", "no", "false")


@dataclasses.dataclass(frozen=True)
class Config:
    """The analysis settings; field docs are in SETTINGS."""

    out: str = None               # None: the shim chose the directory
    analyze: bool = True
    algorithm: str = "auto"
    clock: str = "pingpong"
    threshold: float = 0.0        # seconds
    splits: bool = True
    compress: int = DEFAULT_COMPRESS_LEVEL   # zstandard level, 0 = off
    quiet: bool = False
    verbose: bool = False
    phase: str = None             # MPIGRAPH_PHASE, `mpigraph analyze --phase NAME`: that phase's tables only

    def with_overrides(self, **changes):
        """A copy with the non-None `changes` applied and validated (command-line options)."""
        changes = {k: v for k, v in changes.items() if v is not None}
        if "algorithm" in changes:
            changes["algorithm"] = parse_algorithm(changes["algorithm"], "--algorithm")
        return dataclasses.replace(self, **changes)


def _bad(name, value, accepted):
    return ConfigError("%s=%r is not valid; accepted: %s" % (name, value, accepted))


def parse_switch(value, name):
    """on|off (also 1/0, yes/no, true/false, any case) -> bool."""
    v = value.strip().lower()
    if v in _ON:
        return True
    if v in _OFF:
        return False
    raise _bad(name, value, "on or off (or 1/0, yes/no, true/false)")


def parse_algorithm(value, name="MPIGRAPH_ALGORITHM"):
    v = value.strip().lower()
    if v not in ALGORITHMS:
        raise _bad(name, value, ", ".join(ALGORITHMS))
    return v


def parse_clock(value, name="MPIGRAPH_CLOCK"):
    v = value.strip().lower()
    if v not in CLOCK_METHODS:
        raise _bad(name, value, ", ".join(CLOCK_METHODS))
    return v


def parse_threshold(value, name="MPIGRAPH_THRESHOLD"):
    try:
        seconds = float(value)
    except ValueError:
        seconds = math.nan
    if not (seconds >= 0 and math.isfinite(seconds)):
        raise _bad(name, value, "a number of seconds >= 0, such as 0 or 1e-6")
    return seconds


def parse_compress(value, name="MPIGRAPH_COMPRESS"):
    v = value.strip().lower()
    if v.isdigit() and 0 <= int(v) <= 22:   # a number is a level: "1" is level 1, "0" is off
        return int(v)
    if v in _OFF:
        return 0
    if v in _ON:
        return DEFAULT_COMPRESS_LEVEL
    raise _bad(name, value, "off, on, or a zstandard level 1-22")


def parse_flag(value, name):
    """0/1 flags (QUIET, VERBOSE); on/off spellings are accepted too."""
    return parse_switch(value, name)


# variable -> (Config field, parser)
_PARSERS = {
    "MPIGRAPH_OUT": ("out", lambda value, name: value or None),
    "MPIGRAPH_ANALYZE": ("analyze", parse_switch),
    "MPIGRAPH_ALGORITHM": ("algorithm", parse_algorithm),
    "MPIGRAPH_CLOCK": ("clock", parse_clock),
    "MPIGRAPH_THRESHOLD": ("threshold", parse_threshold),
    "MPIGRAPH_SPLITS": ("splits", parse_switch),
    "MPIGRAPH_COMPRESS": ("compress", parse_compress),
    "MPIGRAPH_QUIET": ("quiet", parse_flag),
    "MPIGRAPH_VERBOSE": ("verbose", parse_flag),
    "MPIGRAPH_PHASE": ("phase", lambda value, name: value.strip() or None),
}
assert set(_PARSERS) == {s.name for s in SETTINGS if not s.shim_only}


def from_env(environ=None):
    """The Config described by `environ` (default os.environ); unset or empty variables keep their default.

    Raises ConfigError naming the first variable with a bad value.
    """
    environ = os.environ if environ is None else environ
    values = {}
    for name, (field, parse) in _PARSERS.items():
        raw = environ.get(name)
        if raw is not None and (raw.strip() or field == "out"):
            values[field] = parse(raw, name)
    return Config(**values)


def settings_table():
    """The settings as a text table: variable, default, meaning (SETTINGS, then TOOL_SETTINGS)."""
    every = SETTINGS + TOOL_SETTINGS
    width = max(len(s.name) for s in every)
    dwidth = max(len(s.default) for s in every)
    lines = ["%-*s  %-*s  %s" % (width, "variable", dwidth, "default", "meaning")]
    for s in every:
        note = " (read by the shim)" if s.shim_only else " (read by the launcher and the build)" \
            if s in TOOL_SETTINGS else ""
        lines.append("%-*s  %-*s  %s%s" % (width, s.name, dwidth, s.default, s.help, note))
    return "\n".join(lines) + "\n"
