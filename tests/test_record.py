"""The C record layout (csrc/record.h) and the Python one (mpigraph/trace/record.py) agree."""

import os
import subprocess

import numpy as np

from mpigraph.trace import record

CSRC = os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, "csrc")

PROBE = r"""
#include <stddef.h>
#include <stdio.h>
#include "record.h"
#define FIELD(type, name) printf("%s %s %zu %zu\n", #type, #name, offsetof(type, name), sizeof(((type *)0)->name));
int main(void)
{
    printf("sizes %zu %zu\n", sizeof(mg_record), sizeof(mg_header));
    FIELD(mg_record, t_start) FIELD(mg_record, t_end) FIELD(mg_record, bytes) FIELD(mg_record, request)
    FIELD(mg_record, comm) FIELD(mg_record, peer) FIELD(mg_record, tag) FIELD(mg_record, root)
    FIELD(mg_record, seq) FIELD(mg_record, func) FIELD(mg_record, flags) FIELD(mg_record, thread) FIELD(mg_record, site)
    FIELD(mg_header, magic) FIELD(mg_header, version) FIELD(mg_header, header_size)
    FIELD(mg_header, record_size) FIELD(mg_header, flags) FIELD(mg_header, world_rank)
    FIELD(mg_header, world_size) FIELD(mg_header, pid) FIELD(mg_header, thread_level)
    FIELD(mg_header, clock_source) FIELD(mg_header, n_functions) FIELD(mg_header, n_records)
    FIELD(mg_header, calib_ticks) FIELD(mg_header, calib_ns) FIELD(mg_header, start_unix_ns)
    FIELD(mg_header, hostname) FIELD(mg_header, job_id) FIELD(mg_header, sync_parent)
    FIELD(mg_header, sync_pingpongs) FIELD(mg_header, sync_init) FIELD(mg_header, sync_final)
    FIELD(mg_header, abort_code) FIELD(mg_header, n_inflight) FIELD(mg_header, inflight) FIELD(mg_header, boot_id)
    FIELD(mg_sync, offset_ns) FIELD(mg_sync, rtt_ns) FIELD(mg_sync, local_ns) FIELD(mg_sync, barrier_ns)
    printf("constants %d %d %d %d %d %d %d %d %d %d %d %d %d\n", MG_PART, MG_LARGE_COUNT, MG_SEND, MG_RECV,
           MG_PERSISTENT, MG_FORTRAN, MG_ERROR, MG_MATCHED, MG_DEVICE, MG_PEER_PROC_NULL, MG_PEER_ANY, MG_TAG_ANY, MG_HEADER_SIZE);
    return 0;
}
"""


def probe_layout(tmp_path):
    src = tmp_path / "probe.c"
    src.write_text(PROBE)
    exe = tmp_path / "probe"
    subprocess.run(["cc", "-I", CSRC, "-o", str(exe), str(src)], check=True)
    return subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout.splitlines()


def test_c_and_python_layouts_agree(tmp_path):
    lines = probe_layout(tmp_path)
    sizes = lines[0].split()
    assert int(sizes[1]) == record.RECORD_DTYPE.itemsize == record.RECORD_SIZE
    assert int(sizes[2]) == record.HEADER_DTYPE.itemsize
    dtypes = {"mg_record": record.RECORD_DTYPE, "mg_header": record.HEADER_DTYPE, "mg_sync": record.SYNC_DTYPE}
    fields = [line.split() for line in lines[1:] if not line.startswith("constants")]
    assert len(fields) == sum(len(d.names) for d in dtypes.values())
    for struct, name, offset, size in fields:
        dtype, py_offset = dtypes[struct].fields[name][:2]
        assert (int(offset), int(size)) == (py_offset, dtype.itemsize), (struct, name)


def test_c_and_python_constants_agree(tmp_path):
    constants = next(line for line in probe_layout(tmp_path) if line.startswith("constants")).split()[1:]
    expected = [record.PART, record.LARGE_COUNT, record.SEND, record.RECV, record.PERSISTENT, record.FORTRAN,
                record.ERROR, record.MATCHED, record.DEVICE, record.PEER_PROC_NULL, record.PEER_ANY, record.TAG_ANY, record.HEADER_SIZE]
    assert [int(c) for c in constants] == expected


def test_write_log_round_trip(tmp_path):
    records = np.zeros(3, record.RECORD_DTYPE)
    records["func"] = [1, 10, 3]
    records["t_end"] = [5, 6, 7]
    path = tmp_path / "rank-0.log"
    record.write_log(str(path), record.empty_header(0, 1), records)
    raw = path.read_bytes()
    assert len(raw) == record.HEADER_SIZE + 3 * record.RECORD_SIZE
    header = np.frombuffer(raw[: record.HEADER_DTYPE.itemsize], record.HEADER_DTYPE)[0]
    assert header["magic"] == record.MAGIC and header["n_records"] == 3
    back = np.frombuffer(raw[record.HEADER_SIZE:], record.RECORD_DTYPE)
    assert (back == records).all()
