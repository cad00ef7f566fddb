"""The wrappers csrc/generate.py makes from the function table: which calls show in the
in-flight slot, which polls merge, which get a large-count twin, which need an MPI-4 header."""

import importlib.util
import os
import re

import pytest

from mpigraph.trace import functions as F

CSRC = os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, "csrc")


@pytest.fixture(scope="module")
def wrappers():
    spec = importlib.util.spec_from_file_location("generate", os.path.join(CSRC, "generate.py"))
    generate = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(generate)
    text = generate.generate()
    mpi4 = text.index("#if MPI_VERSION >= 4")
    bodies = {m.group(1): (m.start() > mpi4, m.group(0))
              for m in re.finditer(r"^int (MPI_\w+)\(.*?^}$", text, re.S | re.M)}
    return bodies


def test_every_table_function_with_parameters_has_its_wrapper(wrappers):
    for f in F.FUNCTIONS:
        if f.params is not None:
            assert f.name in wrappers, f.name
            assert "P%s(" % f.name in wrappers[f.name][1]


def test_blocking_calls_show_in_flight_and_nonblocking_ones_do_not(wrappers):
    for name in ("MPI_Recv", "MPI_Send", "MPI_Sendrecv", "MPI_Probe", "MPI_Barrier", "MPI_Bcast", "MPI_Win_fence",
                 "MPI_File_write_all", "MPI_File_write", "MPI_Win_lock", "MPI_Neighbor_alltoall", "MPI_Comm_split",
                 "MPI_Win_create", "MPI_File_open", "MPI_Win_free"):
        assert "mg_begin(" in wrappers[name][1] and "mg_end(" in wrappers[name][1], name
    for name in ("MPI_Isend", "MPI_Irecv", "MPI_Iprobe", "MPI_Iallreduce", "MPI_Put", "MPI_Rget", "MPI_File_iwrite",
                 "MPI_Send_init", "MPI_Allreduce_init", "MPI_Pready", "MPI_Parrived"):
        assert "mg_begin(" not in wrappers[name][1], name


def test_the_in_flight_peer_of_a_receive_is_its_source(wrappers):
    assert "mg_begin(MG_ID_MPI_Recv, t0, mg_world_peer(c, source), mg_tag(tag), c->id" in wrappers["MPI_Recv"][1]
    assert "mg_begin(MG_ID_MPI_Win_lock, t0, mg_world_peer(c, rank)" in wrappers["MPI_Win_lock"][1]


def test_only_iprobe_merges_failed_polls(wrappers):
    merging = sorted(name for name, (_, body) in wrappers.items() if "mg_poll_repeat" in body)
    assert merging == ["MPI_Iprobe"]       # Test* and Improbe are hand-written (requests.c, messages.c)


def test_large_count_twins_only_where_a_count_changes_type(wrappers):
    for name in ("MPI_Send_c", "MPI_File_write_all_c", "MPI_Put_c", "MPI_Neighbor_alltoall_c",
                 "MPI_Allreduce_init_c"):
        assert name in wrappers and wrappers[name][0], name
    assert "MPI_Psend_init_c" not in wrappers       # its count is an MPI_Count already


def test_mpi4_functions_need_an_mpi4_header(wrappers):
    for f in F.FUNCTIONS:
        if f.params is not None:
            assert wrappers[f.name][0] == (f.since >= 4), f.name
    assert {f.name for f in F.FUNCTIONS if f.since >= 4} >= {"MPI_Psend_init", "MPI_Parrived", "MPI_Barrier_init"}


def test_windows_and_files_number_their_collectives_on_their_own_group(wrappers):
    assert "mg_comm *c = mg_comm_of_win(win);" in wrappers["MPI_Win_fence"][1]
    assert "uint32_t seq = ++c->seq;" in wrappers["MPI_Win_fence"][1]
    assert "mg_comm *c = mg_comm_of_file(fh);" in wrappers["MPI_File_write_all"][1]
    assert "mg_comm *c = mg_comm_of_win(*win);" in wrappers["MPI_Win_free"][1]
    assert "mg_win_freed(saved)" in wrappers["MPI_Win_free"][1]
    assert "mg_file_created(" in wrappers["MPI_File_open"][1]
