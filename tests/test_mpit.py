"""network/mpit.py: the MPI's own protocol limits read through MPI_T.

Known answers: a control variable set in the environment (MPICH reads MPIR_CVAR_* from it,
Open MPI reads OMPI_MCA_*) must come back with exactly that value, from the module on every
rank and in calibrate's printout; a library without MPI_T gives an empty list and the reason."""

import json
import shutil
import subprocess
import sys

import pytest

import mpi_env
from mpigraph.network import mpit
from mpigraph.network.params import COLUMNS

# CH4's shared-memory CMA threshold: a point-to-point size limit this wheel's MPICH reads from
# the environment; 12345 B is no default of any of its variables.
MPICH_VARIABLE, VALUE = "MPIR_CVAR_CH4_IPC_CMA_P2P_THRESHOLD", 12345

# Every rank reads; rank 0 prints all ranks' answers as one JSON line (two ranks printing at
# once may interleave their lines under Open MPI's output forwarding).
READER = ("import json; from mpi4py import MPI; from mpigraph.network import mpit; "
          "settings, reason = mpit.read_settings(); "
          "answers = MPI.COMM_WORLD.gather({'rank': MPI.COMM_WORLD.Get_rank(), 'settings': settings, "
          "'reason': reason}); "
          "MPI.COMM_WORLD.Get_rank() == 0 and print(json.dumps(answers))")


def _read_on_ranks(result):
    assert result.returncode == 0, result.stderr
    answers = [json.loads(line) for line in result.stdout.splitlines() if line.startswith("[")][0]
    assert [a["rank"] for a in answers] == [0, 1]
    return [dict(a["settings"]) for a in answers], [a["reason"] for a in answers]


def test_module_reads_an_overridden_variable_on_every_rank(wheel):
    cmd = [wheel.mpiexec, "-n", "2", sys.executable, "-c", READER]
    default, _ = _read_on_ranks(subprocess.run(cmd, capture_output=True, text=True, env=mpi_env.base_env(),
                                               cwd=mpi_env.NEUTRAL_CWD))
    assert MPICH_VARIABLE in default[0] and default[0][MPICH_VARIABLE] != VALUE
    changed, reasons = _read_on_ranks(subprocess.run(cmd, capture_output=True, text=True,
                                                     env=mpi_env.base_env({MPICH_VARIABLE: str(VALUE)}),
                                                     cwd=mpi_env.NEUTRAL_CWD))
    assert reasons == ["", ""]
    assert [c[MPICH_VARIABLE] for c in changed] == [VALUE, VALUE]
    # Only the overridden variable moved; every name kept is a protocol limit by the documented list.
    assert {k: v for k, v in changed[0].items() if k != MPICH_VARIABLE} == \
        {k: v for k, v in default[0].items() if k != MPICH_VARIABLE}
    assert all(mpit.wanted(name) for name in changed[0])


def test_calibrate_prints_the_overridden_value_and_params_file_is_unchanged(tmp_path, wheel):
    out = tmp_path / "params.csv"
    result = mpi_env.mpigraph(["calibrate", "--out", out, "--sizes", "0,8,64,512,4K,32K", "--repeats", "20",
                               "--bootstrap", "20"], nprocs=2, mpi=wheel, env_extra={MPICH_VARIABLE: str(VALUE)})
    print("\n" + result.stdout)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    head = [i for i, l in enumerate(lines) if l.startswith("the MPI's own settings (MPI_T")]
    assert len(head) == 1      # rank 0 alone prints it
    assert any(l.split() == [MPICH_VARIABLE, "=", str(VALUE), "B"] for l in lines[head[0] + 1:])
    with open(out) as f:
        assert f.readline().strip().split(",") == list(COLUMNS)


class NoToolInterface:
    """A stand-in library: the MPI-2 symbols a library has, none of MPI_T."""

    def MPI_Init(self, *args):
        return 0


class FailingInit(NoToolInterface):
    """A stand-in whose MPI_T exists but refuses to start (an MPI built without it answers so)."""

    def __getattr__(self, name):
        if name.startswith("MPI_T_"):
            return lambda *args: 17      # any error code but MPI_SUCCESS
        raise AttributeError(name)


def test_no_tool_interface_gives_an_empty_list_and_why():
    settings, reason = mpit.read_settings(NoToolInterface())
    assert settings == [] and "MPI_T_init_thread" in reason and "MPI_T_cvar_read" in reason
    assert mpit.report(settings, reason) == ("the MPI's own settings (MPI_T): none could be read: " + reason)
    settings, reason = mpit.read_settings(FailingInit())
    assert settings == [] and reason == "MPI_T_init_thread failed (error 17)"


def test_names_kept_and_left_out():
    kept = ["MPIR_CVAR_CH3_EAGER_MAX_MSG_SIZE", "MPIR_CVAR_CH4_OFI_EAGER_THRESHOLD",
            "MPIR_CVAR_CH4_SHM_POSIX_IQUEUE_CELL_SIZE", "MPIR_CVAR_CH4_IPC_CMA_P2P_THRESHOLD",
            "MPIR_CVAR_NEMESIS_LMT_DMA_THRESHOLD", "btl_vader_eager_limit", "btl_tcp_rndv_eager_limit",
            "btl_sm_max_send_size", "pml_ob1_rendezvous_limit"]
    left = ["MPIR_CVAR_CTXID_EAGER_SIZE", "MPIR_CVAR_CH4_OFI_RNDV_PROTOCOL",
            "MPIR_CVAR_BCAST_IPC_READ_MSG_SIZE_THRESHOLD", "MPIR_CVAR_GPU_FAST_COPY_MAX_SIZE",
            "MPIR_CVAR_CH3_RMA_ACTIVE_REQ_THRESHOLD", "MPIR_CVAR_POSIX_NUM_COLLS_THRESHOLD",
            "btl_vader_fbox_threshold", "plm_base_node_regex_threshold", "dss_buffer_threshold_size",
            "MPIR_CVAR_CH4_SHM_POSIX_IQUEUE_NUM_CELLS", "MPIR_CVAR_ASYNC_PROGRESS"]
    assert [n for n in kept if not mpit.wanted(n)] == [] and [n for n in left if mpit.wanted(n)] == []


def test_report_lines():
    text = mpit.report([("btl_vader_eager_limit", 4096), ("MPIR_CVAR_X_THRESHOLD", -1)], "")
    assert text.splitlines()[1:] == ["  btl_vader_eager_limit = 4096 B", "  MPIR_CVAR_X_THRESHOLD = -1 B"]


OPENMPI = shutil.which("mpirun.openmpi")


@pytest.mark.skipif(OPENMPI is None, reason="Open MPI (Debian openmpi-bin) is not installed")
def test_open_mpi_names_and_pointer_datatypes():
    """Open MPI's MPI_Datatype is a pointer: the same reader, through mpi4py's Open MPI build."""
    env = mpi_env.base_env({"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
                            "MPI4PY_MPIABI": "openmpi", "OMPI_MCA_btl_vader_eager_limit": str(VALUE)})
    result = subprocess.run([OPENMPI, "-n", "2", sys.executable, "-c", READER], capture_output=True, text=True,
                            env=env, cwd=mpi_env.NEUTRAL_CWD)
    settings, reasons = _read_on_ranks(result)
    assert reasons == ["", ""] and [s["btl_vader_eager_limit"] for s in settings] == [VALUE, VALUE]
