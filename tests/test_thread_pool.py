"""mpigraph.util.threads.pool: threads while they can start, the calls made inline once the interpreter
exits (where an mpi4py program's in-job analysis runs), with the same results either way."""

import subprocess
import sys

import numpy as np

from mpigraph.util import threads

AT_EXIT = """
import atexit, sys
import numpy as np
from mpigraph.report import writer as report
from mpigraph.util import threads
from mpigraph.schema import Column

def write():
    pool = threads.pool(2, "test")
    print(type(pool).__name__, flush=True)
    columns = [Column("t", "time", ""), Column("n", "int", "")]
    table = {"t": np.arange(10, dtype=np.int64) * 10**9 + 5, "n": np.arange(10)}
    report.CSV_BLOCK_ROWS = 3
    report.write_csv(sys.argv[1] + "/t.csv", table, columns)
    report.write_parquet_blocks(sys.argv[1] + "/t.parquet", iter([table, table]), columns)
    print("written", flush=True)

if len(sys.argv) > 2:
    write()
else:
    atexit.register(write)
"""


def run_writer(tmp_path, now):
    result = subprocess.run([sys.executable, "-c", AT_EXIT, str(tmp_path)] + (["now"] if now else []),
                            capture_output=True, text=True)
    assert result.returncode == 0 and "written" in result.stdout, result.stderr
    return result.stdout.split()[0]


def test_at_exit_the_report_writers_run_inline_and_write_the_same(tmp_path):
    (tmp_path / "now").mkdir()
    (tmp_path / "exit").mkdir()
    assert run_writer(tmp_path / "now", now=True) == "ThreadPoolExecutor"
    assert run_writer(tmp_path / "exit", now=False) == "Inline"
    for name in ("t.csv", "t.parquet"):
        assert (tmp_path / "now" / name).read_bytes() == (tmp_path / "exit" / name).read_bytes()
    assert (tmp_path / "now" / "t.csv").read_text().splitlines()[1:3] == ["0.000000005,0", "1.000000005,1"]


def test_inline_calls_at_submit_and_keeps_the_error():
    calls = []
    with threads.Inline() as pool:
        done = pool.submit(calls.append, 1)
        assert calls == [1] and done.done() and done.result() is None
        failed = pool.submit(np.zeros, -1)
        assert isinstance(failed.exception(), ValueError)
