"""Run mpi4py's own test suite with and without the mpigraph shim and compare.

    python scripts/mpi4py_suite.py [--ranks 1 2 4] [--workdir DIR] [--timeout S]

Downloads the source distribution of the installed mpi4py version
(``pip download --no-binary :all: --no-deps mpi4py==<version>``), then runs its
``test/main.py -v`` under ``mpiexec -n N`` for every N, once plainly and once
with ``LD_PRELOAD=$(mpigraph lib)`` (recording and the in-job analysis on, the
summary quiet).  Each rank's unittest output goes to its own file; a test
passes when it reports ``ok`` on every rank.  Prints the counts side by side
and every test whose outcome differs.  Exit status 0 when every test that
passes without the shim passes with it (and the exit codes agree), else 1.

It takes minutes per run on a small machine: not a CI test.
"""

import argparse
import collections
import glob
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile

OUTCOME = re.compile(r"^\s*(test\w*) \(([\w.]+)\)((?: \([^\n]*?\))?)\s\.\.\.\s(ok|FAIL|ERROR|skipped|"
                     r"expected failure|unexpected success)", re.M)
RAN = re.compile(r"^Ran (\d+) tests? in", re.M)
MAX_DIFFERENCES = 40
KINDS = ("ok", "FAIL", "ERROR", "skipped", "expected failure", "unexpected success")


def mpi4py_version():
    import mpi4py

    return mpi4py.__version__


def fetch_suite(workdir, version):
    """Download and unpack mpi4py's sdist once; returns its test/ directory."""
    tests = os.path.join(workdir, "mpi4py-%s" % version, "test")
    if os.path.isdir(tests):
        return tests
    subprocess.run([sys.executable, "-m", "pip", "download", "--no-binary", ":all:", "--no-deps",
                    "mpi4py==%s" % version, "-d", workdir], check=True, stdout=subprocess.DEVNULL)
    with tarfile.open(glob.glob(os.path.join(workdir, "mpi4py-%s.tar.gz" % version))[0]) as sdist:
        sdist.extractall(workdir, filter="data")
    return tests


def shim_library(workdir):
    """A private copy of the shim: rebuilding the source tree's library must not touch runs in progress."""
    out = subprocess.run([sys.executable, "-m", "mpigraph", "lib"], capture_output=True, text=True, check=True)
    copy = os.path.join(workdir, "libmpigraph.so")
    shutil.copy(out.stdout.strip(), copy + ".new")
    os.replace(copy + ".new", copy)
    return copy


def run_suite(tests, nprocs, logdir, shim, timeout):
    """Run the suite on nprocs ranks; returns (exit code or 'timeout', {rank: text of its unittest output})."""
    os.makedirs(logdir, exist_ok=True)
    cmd = ["mpiexec", "-n", str(nprocs)]
    if shim:
        for name, value in (("LD_PRELOAD", shim), ("MPIGRAPH_OUT", os.path.join(logdir, "mpigraph-run")),
                            ("MPIGRAPH_QUIET", "1")):
            cmd += ["-genv", name, value]
    # Each rank writes its own file: PMI_RANK is set by the launcher for every rank.
    cmd += ["sh", "-c", 'exec "$0" main.py -v > "$1/out.$PMI_RANK" 2>&1', sys.executable, logdir]
    env = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD" and not k.startswith("MPIGRAPH_")}
    with open(os.path.join(logdir, "mpiexec.out"), "w") as launcher_output:
        try:
            code = subprocess.run(cmd, cwd=tests, env=env, timeout=timeout, stdout=launcher_output,
                                  stderr=subprocess.STDOUT).returncode
        except subprocess.TimeoutExpired:
            code = "timeout"
    texts = {}
    for rank in range(nprocs):
        path = os.path.join(logdir, "out.%d" % rank)
        texts[rank] = open(path, errors="replace").read() if os.path.exists(path) else ""
    return code, texts


def outcomes(texts):
    """{test id: outcome}: 'ok' only when ok on every rank, else the worst outcome seen on any rank.

    Subtests are tests of their own ("test.id (param=value)").
    """
    per_test = collections.defaultdict(set)
    for text in texts.values():
        for name, where, subtest, kind in OUTCOME.findall(text):
            test = "%s.%s" % (where.rsplit(".", 1)[0] if where.endswith(name) else where, name)
            per_test[test + subtest].add(kind)
    result = {}
    for test, kinds in per_test.items():
        for kind in ("ERROR", "FAIL", "unexpected success", "expected failure", "skipped", "ok"):
            if kind in kinds:
                result[test] = kind
                break
    return result


def tests_ran(texts):
    """unittest's own 'Ran N tests' count of each rank (None where a rank never got there)."""
    found = [RAN.findall(texts[r]) for r in sorted(texts)]
    return [int(f[-1]) if f else None for f in found]


def counts(results):
    c = collections.Counter(results.values())
    return [len(results)] + [c[k] for k in KINDS]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ranks", type=int, nargs="+", default=[1, 2, 4])
    parser.add_argument("--workdir", default=os.path.join(tempfile.gettempdir(), "mpigraph-mpi4py-suite"))
    parser.add_argument("--timeout", type=float, default=3600, help="seconds per run before it counts as hung")
    args = parser.parse_args(argv)
    os.makedirs(args.workdir, exist_ok=True)
    tests = fetch_suite(args.workdir, mpi4py_version())
    shim = shim_library(args.workdir)
    print("mpi4py %s suite from %s\nshim %s\n" % (mpi4py_version(), tests, shim), flush=True)
    header = "%-5s %-7s %6s %7s %6s %6s %6s %7s %7s %6s  %s" % (
        "ranks", "shim", "tests", "passed", "failed", "errors", "skip", "xfail", "xpass", "exit", "unittest 'Ran N' per rank")
    rows, all_equal = [], True
    for n in args.ranks:
        results = {}
        for label, library in (("without", None), ("with", shim)):
            logdir = os.path.join(args.workdir, "n%d-%s" % (n, label))
            code, texts = run_suite(tests, n, logdir, library, args.timeout)
            results[label] = (code, outcomes(texts))
            rows.append("%-5d %-7s %6d %7d %6d %6d %6d %7d %7d %6s  %s" % (
                (n, label) + tuple(counts(results[label][1])) + (code, tests_ran(texts))))
            print(rows[-1], flush=True)
        (code_a, plain), (code_b, shimmed) = results["without"], results["with"]
        lost = sorted(t for t, k in plain.items() if k == "ok" and shimmed.get(t) != "ok")
        changed = sorted(t for t in set(plain) | set(shimmed) if plain.get(t) != shimmed.get(t))
        for test in changed[:MAX_DIFFERENCES]:
            print("  n=%d differs: %s: without %s, with %s" % (n, test, plain.get(test), shimmed.get(test)))
        if len(changed) > MAX_DIFFERENCES:
            print("  n=%d: ... %d more differences" % (n, len(changed) - MAX_DIFFERENCES))
        if lost or code_a != code_b:
            all_equal = False
    print("\nevery test that passes without the shim passes with it: %s" % ("yes" if all_equal else "NO"))
    return 0 if all_equal else 1


if __name__ == "__main__":
    sys.exit(main())
