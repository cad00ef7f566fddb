"""An analysed run as an OTF2 archive, through the PyPI ``otf2`` package's writer.

What is written (the corrected times of calls.parquet, in ns from the run's start, shifted so the
earliest MPI_Init starts at 0: OTF2 times are unsigned):

- definitions: a system tree (machine -> host -> rank), a location group and a location per rank,
  a region per MPI function and call site (paradigm MPI, its role: point-to-point, one-to-all,
  ...; named after the function, its source file and line the call site's, its description the
  call site's name "MPI_Allreduce at solver.c:212": callsites.csv), a
  communicator per communicator of the run (traffic.communicators: world and every one created),
  over a COMM_LOCATIONS group of all ranks;
- per rank, per call: Enter at its start, Leave at its end; MpiSend at the start of the call that
  posted a send (Send, Isend, Sendrecv, Start), MpiRecv at the end of the call that completed a
  receive (Recv, Sendrecv, the Wait/Test of an Irecv), with the peer's rank in the communicator,
  the tag and the bytes (match.p2p.operations, from the raw logs); MpiCollectiveBegin/End around
  each blocking collective on a known communicator (root as its rank there, size_sent the bytes
  the member passed, size_received 0: the shim does not record it).
- the phase marks (MPI_Pcontrol, mpigraph_phase_begin/_end) are no MPI calls here: each named
  region and each Pcontrol phase is a region of its own (paradigm USER, role CODE, named as in
  phases.csv: "solve", "pcontrol 2 (level 1)"), entered and left at the marks' times, properly
  nested (export.regions); regions still open are left at the end of the rank's last call.

Nonblocking sends are written as MpiSend at their post (OTF2's MpiIsend needs the completion's
request events, which a reader matching messages does not use); nonblocking collectives are
plain regions.  A message on a communicator the logs do not describe is written on world with
world ranks.  Events are written one at a time (the package's writer is a Python call per event).
"""

import os

import numpy as np

from mpigraph.export import regions
from mpigraph.match import core, p2p
from mpigraph.phases import regions as phase_regions
from mpigraph.trace import functions as mf
from mpigraph.trace import logs as trace
from mpigraph.trace.batches import of_ranks
from mpigraph.traffic import communicators as comms

# Event codes, in the order they are written within one call: a mark's region leaves and enters
# (a mark has no events of its own), an MPI call's events, the regions left at the rank's end.
REGION_LEAVE, REGION_ENTER, ENTER, SEND, COLL_BEGIN, RECV, COLL_END, LEAVE, REGION_CLOSE = range(9)
EVENT_NAMES = ("Leave (region)", "Enter (region)", "Enter", "MpiSend", "MpiCollectiveBegin", "MpiRecv",
               "MpiCollectiveEnd", "Leave", "Leave (region)")
REGION_DESCRIPTIONS = {regions.NAMED: "a named region of the mpigraph phase API (mpigraph_phase_begin/_end)",
                       regions.PCONTROL: "an MPI_Pcontrol phase: from one MPI_Pcontrol call to the next"}

_ROLES = {mf.SEND: "POINT2POINT", mf.RECV: "POINT2POINT", mf.SENDRECV: "POINT2POINT", mf.ISEND: "POINT2POINT",
          mf.IRECV: "POINT2POINT", mf.COMPLETION: "POINT2POINT", mf.PROBE: "POINT2POINT",
          mf.ONE_TO_N: "COLL_ONE2ALL", mf.N_TO_ONE: "COLL_ALL2ONE", mf.N_TO_N: "COLL_ALL2ALL",
          mf.SCAN: "COLL_OTHER"}
_COLLECTIVE_KINDS = (mf.N_TO_N, mf.ONE_TO_N, mf.N_TO_ONE, mf.SCAN)


class ExportError(Exception):
    """The run cannot be exported (not analysed, or the otf2 package missing); the message says what to do."""


def _otf2():
    try:
        import otf2
    except ImportError:
        raise ExportError("the OTF2 export needs the otf2 package: pip install 'mpigraph[otf2]'") from None
    return otf2


def _collective_op(otf2, f):
    """The OTF2 CollectiveOp of a blocking collective function, None for others."""
    if f.kind not in _COLLECTIVE_KINDS or f.nonblocking:
        return None
    return getattr(otf2.CollectiveOp, f.name[len("MPI_"):].upper(), None)


def _read_calls(run_dir):
    """calls.parquet's columns the export needs, as numpy arrays, in (rank, call) order."""
    import pyarrow.parquet as pq

    path = os.path.join(run_dir, "calls.parquet")
    if not os.path.exists(path):
        raise ExportError("%s does not exist: analyse the run first (mpigraph analyze %s)" % (path, run_dir))
    import pyarrow.dataset as ds

    columns = ["rank", "call", "function", "start_ns", "end_ns", "comm", "root", "bytes", "tag"]
    # An analysis of a version without call sites has no callsite column: one region per function.
    columns += ["callsite"] if "callsite" in ds.dataset(path, format="parquet").schema.names else []
    table = pq.read_table(path, columns=columns)
    calls = {name: table[name].to_numpy(zero_copy_only=False) for name in table.column_names}
    order = np.lexsort((calls["call"], calls["rank"]))
    return {name: col[order] for name, col in calls.items()}


def _call_sites(run_dir):
    """{call-site id: (name, file, line)} of callsites.parquet ({} when there is none)."""
    import pyarrow.parquet as pq

    path = os.path.join(run_dir, "callsites.parquet")
    if not os.path.exists(path):
        return {}
    table = pq.read_table(path, columns=["callsite", "name", "file", "line"]).to_pydict()
    return {int(i): (n, f, int(line)) for i, n, f, line in zip(table["callsite"], table["name"], table["file"],
                                                               table["line"]) if i > 0}


def _hosts(run_dir, world_size):
    import pyarrow.parquet as pq

    path = os.path.join(run_dir, "ranks.parquet")
    if not os.path.exists(path):
        return ["host"] * world_size
    return pq.read_table(path, columns=["host"])["host"].to_pylist()


def export(run_dir, out_dir):
    """Write the OTF2 archive of the analysed run in run_dir to out_dir (traces.otf2 and its
    files).  Returns {event name: count} written."""
    otf2 = _otf2()
    run_dir = os.path.abspath(run_dir)
    info = trace.find_run(run_dir)
    calls = _read_calls(run_dir)
    logs = trace.open_logs(info, range(info.world_size))
    bounds = np.searchsorted(calls["rank"], np.arange(info.world_size + 1))
    rank_calls = {}
    for rank, log in logs.items():
        a, b = bounds[rank], bounds[rank + 1]
        rc = core.rank_calls(log, np.zeros(log.n_records, np.int64), np.zeros(log.n_records, np.int64))
        if rc.n_calls != b - a:
            raise ExportError("%s: rank %d has %d calls in its log but %d in calls.parquet: analyse the run again"
                              % (run_dir, rank, rc.n_calls, b - a))
        rank_calls[rank] = rc
    known = comms.Communicators(comms.concat([comms.creation_rows(b) for b in of_ranks(rank_calls, core.CallBatch)]),
                                info.world_size)
    if os.path.exists(os.path.join(out_dir, "traces.otf2")):
        raise ExportError("%s already holds an OTF2 archive: give another directory" % out_dir)
    shift = max(0, -int(calls["start_ns"].min(initial=0)))
    counts = dict.fromkeys(EVENT_NAMES, 0)
    with otf2.writer.open(out_dir, timer_resolution=1_000_000_000) as archive:
        defs = _Definitions(otf2, archive, info.world_size, _hosts(run_dir, info.world_size), known,
                            _call_sites(run_dir))
        for rank, rc in rank_calls.items():
            a, b = bounds[rank], bounds[rank + 1]
            mine = {name: col[a:b] for name, col in calls.items()}
            events = rank_events(rc, mine, set(defs.comms), shift, phase_regions.read_names(logs[rank].path))
            _write_rank(otf2, archive.event_writer_from_location(defs.locations[rank]), defs, events, counts)
    return counts


class _Definitions:
    """The archive's global definitions: locations, regions per (function id, call site),
    communicators by id.  sites: {call-site id: (name, file, line)}."""

    def __init__(self, otf2, archive, world_size, hosts, known, sites=None):
        d = archive.definitions
        machine = d.system_tree_node("machine")
        nodes = {h: d.system_tree_node(h, parent=machine) for h in dict.fromkeys(hosts)}
        self.locations = []
        for rank in range(world_size):
            group = d.location_group("MPI Rank %d" % rank, system_tree_parent=nodes[hosts[rank]])
            self.locations.append(d.location("Rank %d" % rank, type=otf2.LocationType.CPU_THREAD, group=group))
        all_ranks = d.group("MPI_COMM_WORLD locations", group_type=otf2.GroupType.COMM_LOCATIONS,
                            paradigm=otf2.Paradigm.MPI, members=self.locations)
        del all_ranks
        self.comms, self.members = {}, {}
        world = self._comm(otf2, d, comms.WORLD_ID, "world", np.arange(world_size), None)
        for comm_id in known.ids.tolist():
            members = known.members(comm_id)
            if members is not None:
                self._comm(otf2, d, comm_id, known.name(comm_id), members, world)
        self.regions, self.user_regions = {}, {}
        self._d, self._otf2, self._sites = d, otf2, sites or {}

    def user_region(self, kind, name):
        """The region of a named region or Pcontrol phase ((kind, name) of export.regions), defined when first used."""
        if (kind, name) not in self.user_regions:
            self.user_regions[(kind, name)] = self._d.region(
                name, description=REGION_DESCRIPTIONS[kind], region_role=self._otf2.RegionRole.CODE,
                paradigm=self._otf2.Paradigm.USER)
        return self.user_regions[(kind, name)]

    def _comm(self, otf2, d, comm_id, name, members, parent):
        group = d.group(name, group_type=otf2.GroupType.COMM_GROUP, paradigm=otf2.Paradigm.MPI,
                        members=[int(m) for m in members])
        self.comms[comm_id] = d.comm(name, group=group, parent=parent)
        self.members[comm_id] = np.asarray(members, np.int64)
        return self.comms[comm_id]

    def region(self, func_id, site=0):
        """The region of a function id at a call site (0: unknown), defined when first used."""
        key = (func_id, site)
        if key in self.regions:
            return self.regions[key]
        f = mf.BY_ID.get(func_id)
        role = getattr(self._otf2.RegionRole, _ROLES.get(f.kind if f else None, "FUNCTION"))
        name, file, line = self._sites.get(site, ("", "", 0))
        where = {"description": name, "source_file": file or None, "begin_line_number": line} if name else {}
        self.regions[key] = self._d.region(mf.name_of(func_id), region_role=role, paradigm=self._otf2.Paradigm.MPI,
                                           **where)
        return self.regions[key]


def comm_rank(members, comm_id, world_ranks):
    """(comm id written, ranks in it) of world ranks on comm_id: world and the world ranks
    where the communicator's members are not known."""
    m = members.get(int(comm_id))
    if m is None:
        return comms.WORLD_ID, world_ranks
    order = np.argsort(m)
    at = np.searchsorted(m[order], world_ranks)
    at = np.minimum(at, len(m) - 1)
    ok = m[order][at] == world_ranks
    return (int(comm_id), order[at]) if ok.all() else (comms.WORLD_ID, world_ranks)


def rank_events(rc, calls, comm_ids, shift, names=None):
    """One rank's events in writing order: {code, time, call, func, peer, tag, bytes, comm, root,
    region} (numpy columns; peer (world rank), tag, bytes for sends and receives, root for
    collectives, region for region events: an index into the list under "regions", its (kind,
    name)); collective events only on the communicators `comm_ids` (those defined in the archive).
    The phase marks are no MPI calls: they enter and leave regions (export.regions; names: the
    rank's {id: region name})."""
    n = rc.n_calls
    start, end = calls["start_ns"].astype(np.int64) + shift, calls["end_ns"].astype(np.int64) + shift
    ops, _ = p2p.operations(core.CallBatch([rc]))
    resolved = (ops["peer"] >= 0) & (ops["tag"] >= 0)
    send = resolved & (ops["side"] == p2p.SEND_SIDE)
    recv = resolved & (ops["side"] == p2p.RECV_SIDE) & (ops["done_call"] >= 0)
    func = rc.func
    is_coll = np.array([_is_blocking_collective(f) for f in range(mf.MAX_ID + 1)])[func]
    on_known = np.isin(calls["comm"], np.array(sorted(comm_ids), np.int64))
    coll = np.flatnonzero(is_coll & on_known)
    every = np.flatnonzero(~phase_regions.IS_MARK[func])
    reg, kinds = regions.rank_region_events(func, calls["tag"], names or {})
    leave = reg["code"] == regions.LEAVE_CODE
    parts = [  # (code, call, peer, tag, bytes, comm, root, region)
        (REGION_LEAVE, reg["call"][leave & ~reg["at_end"]], -1, -1, 0, 0, -1, reg["region"][leave & ~reg["at_end"]]),
        (REGION_ENTER, reg["call"][~leave], -1, -1, 0, 0, -1, reg["region"][~leave]),
        (ENTER, every, -1, -1, 0, 0, -1),
        (SEND, ops["post_call"][send], ops["peer"][send], ops["tag"][send], ops["bytes"][send], ops["comm"][send], -1),
        (COLL_BEGIN, coll, -1, -1, 0, calls["comm"][coll], -1),
        (RECV, ops["done_call"][recv], ops["peer"][recv], ops["tag"][recv], ops["bytes"][recv], ops["comm"][recv], -1),
        (COLL_END, coll, -1, -1, calls["bytes"][coll], calls["comm"][coll], calls["root"][coll]),
        (LEAVE, every, -1, -1, 0, 0, -1),
        (REGION_CLOSE, np.full(int(reg["at_end"].sum()), n - 1), -1, -1, 0, 0, -1, reg["region"][reg["at_end"]]),
    ]
    columns = {k: [] for k in ("code", "call", "peer", "tag", "bytes", "comm", "root", "region")}
    for code, call, *rest in parts:
        call = np.asarray(call, np.int64)
        columns["code"].append(np.full(len(call), code))
        columns["call"].append(call)
        for name, value in zip(("peer", "tag", "bytes", "comm", "root", "region"), rest + [-1] * (6 - len(rest))):
            columns[name].append(np.broadcast_to(np.asarray(value, np.int64), len(call)))
    ev = {k: np.concatenate(v) for k, v in columns.items()}
    # Within a call: enter, sends, collective begin, receives, collective end, leave; the sort is stable.
    order = np.lexsort((ev["code"], ev["call"]))
    ev = {k: v[order] for k, v in ev.items()}
    at_start = np.isin(ev["code"], (REGION_LEAVE, REGION_ENTER, ENTER, SEND, COLL_BEGIN))
    t = np.where(at_start, start[ev["call"]], end[ev["call"]])
    ev["time"] = np.maximum.accumulate(t) if len(t) else t     # OTF2 wants a location's times not to fall
    ev["func"] = func[ev["call"]]
    ev["regions"] = kinds
    ev["site"] = np.asarray(calls["callsite"], np.int64)[ev["call"]] if "callsite" in calls \
        else np.zeros(len(ev["call"]), np.int64)
    return ev


def _is_blocking_collective(func_id):
    f = mf.BY_ID.get(func_id)
    return f is not None and f.kind in _COLLECTIVE_KINDS and not f.nonblocking


def _write_rank(otf2, writer, defs, ev, counts):
    """Write one rank's events (rank_events) to its event writer."""
    members = defs.members
    code = ev["code"]
    # Peers and roots as ranks in their communicators, computed per communicator (a few).
    peer_in = np.array(ev["peer"])
    comm_out = np.array(ev["comm"])
    for comm_id in np.unique(ev["comm"][(code == SEND) | (code == RECV)]).tolist():
        rows = np.flatnonzero(((code == SEND) | (code == RECV)) & (ev["comm"] == comm_id))
        comm_out[rows], peer_in[rows] = comm_rank(members, comm_id, ev["peer"][rows])
    root_in = np.full(len(code), otf2.UNDEFINED_UINT32 if hasattr(otf2, "UNDEFINED_UINT32") else 0xffffffff,
                      np.int64)
    for comm_id in np.unique(ev["comm"][code == COLL_END]).tolist():
        rows = np.flatnonzero((code == COLL_END) & (ev["comm"] == comm_id) & (ev["root"] >= 0))
        if len(rows):
            _, root_in[rows] = comm_rank(members, comm_id, ev["root"][rows])
    # Python lists and bound methods: the loop below is a Python call per event (the package's
    # writer); numpy scalars and attribute lookups would double its time.
    user = [defs.user_region(kind, name) for kind, name in ev["regions"]]
    columns = zip(code.tolist(), ev["time"].tolist(), ev["func"].tolist(), peer_in.tolist(), comm_out.tolist(),
                  ev["tag"].tolist(), ev["bytes"].tolist(), ev["comm"].tolist(), root_in.tolist(),
                  ev["region"].tolist(), ev["site"].tolist())
    enter, leave, send, recv = writer.enter, writer.leave, writer.mpi_send, writer.mpi_recv
    begin, end = writer.mpi_collective_begin, writer.mpi_collective_end
    region, comm_of = defs.region, defs.comms
    for c, t, f, peer, comm_id, tag, nbytes, coll_comm, root, r, site in columns:
        if c == REGION_ENTER:
            enter(t, user[r])
        elif c == REGION_LEAVE or c == REGION_CLOSE:
            leave(t, user[r])
        elif c == ENTER:
            enter(t, region(f, site))
        elif c == LEAVE:
            leave(t, region(f, site))
        elif c == SEND:
            send(t, peer, comm_of[comm_id], tag, nbytes)
        elif c == RECV:
            recv(t, peer, comm_of[comm_id], tag, nbytes)
        elif c == COLL_BEGIN:
            begin(t)
        else:
            op = _collective_op(otf2, mf.BY_ID[f])
            end(t, op if op is not None else otf2.CollectiveOp.BARRIER, comm_of[coll_comm], root, nbytes, 0)
    for c, n in zip(*np.unique(code, return_counts=True)):
        counts[EVENT_NAMES[c]] += int(n)
