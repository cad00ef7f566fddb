"""The MPI's own protocol settings, read through MPI-3's tool interface (MPI_T).

calibrate finds protocols and their thresholds from ping-pong times alone; a bend of the
times may be a protocol switch or a cache step.  The MPI knows its switch points: its control
variables (MPI_T_cvar_*; MPI standard 3.1, section 14.3.6) hold the eager limits and cell sizes
of its transports.  This module reads the integer ones whose names say a protocol limit, so
calibrate can print them beside its fit.

mpi4py has no MPI_T API, so the functions are called with ctypes from the MPI library mpi4py
loaded (it must be initialised first, which loads it):

    MPI_T_init_thread(required, *provided)
    MPI_T_cvar_get_num(*num)
    MPI_T_cvar_get_info(i, name, *name_len, *verbosity, *datatype, *enumtype, desc, *desc_len,
                        *bind, *scope)
    MPI_T_cvar_handle_alloc(i, obj_handle, *handle, *count)   obj_handle NULL: unbound variables
    MPI_T_cvar_read(handle, buf)
    MPI_T_cvar_handle_free(*handle)
    MPI_T_finalize()

ABI: MPI_Datatype is an int in MPICH and a pointer in Open MPI, MPI_T_enum and
MPI_T_cvar_handle are pointers in both: the out-buffers are pointer-sized and zeroed, and the
datatype is compared with mpi4py's own handles (MPI.INT.handle ...), which are the same values.
"""

import ctypes
import re
import struct
from typing import List, Optional, Tuple

# A name says a protocol limit (case-insensitive) when it holds one of these words:
#   EAGER, RNDV, RENDEZVOUS   the eager/rendezvous switch (MPICH ..._EAGER_MAX_MSG_SIZE,
#                             ..._EAGER_THRESHOLD; Open MPI btl_*_eager_limit, *_rndv_eager_limit)
#   THRESHOLD                 a size from which another path is taken (MPICH's CMA/XPMEM copies)
#   CELL_SIZE                 a shared-memory cell: larger messages take several cells
#   MAX_MSG, MAX_SEND_SIZE    the largest piece sent at once (Open MPI btl_*_max_send_size)
#   LMT                       MPICH's large message transfer (nemesis)
PROTOCOL_WORDS = re.compile(r"EAGER|RNDV|RENDEZVOUS|THRESHOLD|CELL_SIZE|MAX_MSG|MAX_SEND_SIZE|LMT", re.I)
# ... but not the limits of collectives, RMA, GPU buffers, communicator ids, Open MPI's
# launcher, I/O and packing frameworks (plm_, io_, dss_): those are no point-to-point protocol of
# host memory, which is what calibrate times; nor counts and modes that are no size (MPICH's
# ..._RNDV_PROTOCOL is a mode number, Open MPI's btl_vader_fbox_threshold a number of sends).
NOT_POINT_TO_POINT = re.compile(r"CTXID|GPU|RMA|BCAST|REDUCE|ALLTOALL|ALLGATHER|COLL|YAKSA|STRIPING|NUM_CELLS|"
                                r"PROTOCOL$|FBOX|MECHANISM|^(plm|io|dss|osc)_", re.I)

NAME_LEN, DESC_LEN = 256, 1024
MPI_SUCCESS = 0


def _integer_formats() -> dict:
    """{datatype handle: struct format} of the integer types a control variable may have."""
    from mpi4py import MPI

    formats = {}
    for name, fmt in (("INT", "i"), ("UNSIGNED", "I"), ("LONG", "l"), ("UNSIGNED_LONG", "L"),
                      ("LONG_LONG", "q"), ("UNSIGNED_LONG_LONG", "Q"), ("COUNT", "q"), ("AINT", "q"),
                      ("OFFSET", "q")):
        datatype = getattr(MPI, name, None)
        if datatype is not None and datatype != MPI.DATATYPE_NULL:
            formats[datatype.handle] = fmt
    return formats


def load_library():
    """The MPI library mpi4py loaded (ctypes.CDLL), or None.  The global scope first (a program
    linked with libmpi), then the MPI library mapped into this process (mpi4py's extension loads
    it privately, so its symbols are not in the global scope)."""
    from mpigraph.comm.launch import loaded_libmpi

    candidates = [None] + (loaded_libmpi() or "").split(", ")
    for path in candidates:
        if path == "":
            continue
        try:
            lib = ctypes.CDLL(path)
        except OSError:
            continue
        if hasattr(lib, "MPI_T_cvar_get_num"):
            return lib
    return None


def wanted(name: str) -> bool:
    """A protocol limit of point-to-point messages, by its name (PROTOCOL_WORDS, NOT_POINT_TO_POINT)."""
    return bool(PROTOCOL_WORDS.search(name)) and not NOT_POINT_TO_POINT.search(name)


def read_settings(lib=None) -> Tuple[List[Tuple[str, int]], str]:
    """([(name, value)] of the protocol limits in index order, reason).  The reason is "" when
    the interface answered, else why nothing could be read (the list is then empty).  Never
    raises: the settings are an aid to reading the fit, not a part of it."""
    if lib is None:
        lib = load_library()
    if lib is None:
        return [], "no MPI library with MPI_T found in this process"
    missing = [f for f in ("MPI_T_init_thread", "MPI_T_cvar_get_num", "MPI_T_cvar_get_info",
                           "MPI_T_cvar_handle_alloc", "MPI_T_cvar_read", "MPI_T_cvar_handle_free",
                           "MPI_T_finalize") if not hasattr(lib, f)]
    if missing:
        return [], "the MPI library has no %s (no MPI-3 tool interface)" % ", ".join(missing)
    provided = ctypes.c_int()
    code = lib.MPI_T_init_thread(0, ctypes.byref(provided))     # 0: MPI_THREAD_SINGLE in every MPI
    if code != MPI_SUCCESS:
        return [], "MPI_T_init_thread failed (error %d)" % code
    try:
        number = ctypes.c_int()
        code = lib.MPI_T_cvar_get_num(ctypes.byref(number))
        if code != MPI_SUCCESS:
            return [], "MPI_T_cvar_get_num failed (error %d)" % code
        formats = _integer_formats()
        found = []
        for index in range(number.value):
            item = _read_one(lib, index, formats)
            if item is not None:
                found.append(item)
    finally:
        lib.MPI_T_finalize()
    if not found:
        return [], "the MPI's %d control variables hold no integer protocol limit" % number.value
    return found, ""


def _read_one(lib, index: int, formats: dict) -> Optional[Tuple[str, int]]:
    """(name, value) of control variable `index` if it is a wanted, unbound, single integer."""
    c = ctypes
    name, name_len = c.create_string_buffer(NAME_LEN), c.c_int(NAME_LEN)
    desc, desc_len = c.create_string_buffer(DESC_LEN), c.c_int(DESC_LEN)
    # Pointer-sized and zeroed: an int datatype (MPICH) fills the low half, a pointer the whole.
    datatype, enumtype = c.c_void_p(0), c.c_void_p(0)
    verbosity, bind, scope = c.c_int(), c.c_int(), c.c_int()
    if lib.MPI_T_cvar_get_info(index, name, c.byref(name_len), c.byref(verbosity), c.byref(datatype),
                               c.byref(enumtype), desc, c.byref(desc_len), c.byref(bind),
                               c.byref(scope)) != MPI_SUCCESS:
        return None
    text = name.value.decode("ascii", "replace")
    fmt = formats.get(datatype.value or 0)
    if fmt is None or not wanted(text):
        return None
    handle, count = c.c_void_p(0), c.c_int()
    # A NULL object: variables bound to an object (a communicator ...) refuse it and are skipped.
    if lib.MPI_T_cvar_handle_alloc(index, None, c.byref(handle), c.byref(count)) != MPI_SUCCESS:
        return None
    try:
        if count.value != 1:
            return None
        buf = c.create_string_buffer(16)
        if lib.MPI_T_cvar_read(handle, buf) != MPI_SUCCESS:
            return None
        return text, struct.unpack_from(fmt, buf.raw)[0]
    finally:
        lib.MPI_T_cvar_handle_free(c.byref(handle))


def report(settings: List[Tuple[str, int]], reason: str) -> str:
    """The lines calibrate prints under its table."""
    if not settings:
        return "the MPI's own settings (MPI_T): none could be read: %s" % reason
    width = max(len(n) for n, _ in settings)
    lines = ["the MPI's own settings (MPI_T; protocol limits by name, a negative value means the "
             "transport's own default):"]
    lines += ["  %-*s = %d B" % (width, n, v) for n, v in settings]
    return "\n".join(lines)


def settings_text() -> str:
    """report(read_settings()), never failing: whatever goes wrong becomes the reason."""
    try:
        return report(*read_settings())
    except Exception as error:      # an odd MPI must not cost the user the calibration
        return report([], "%s: %s" % (type(error).__name__, error))

