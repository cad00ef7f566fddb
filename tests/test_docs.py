"""The documentation stays true to the code: README.md short and complete, docs/outputs.md made
from mpigraph/schema.py, no comment or docstring naming a commit of this repository."""

import html
import os
import re
import shutil
import subprocess
import sys

import pytest

from mpigraph import config

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
README = os.path.join(ROOT, "README.md")
SOURCE_SUFFIXES = (".py", ".c", ".h", ".html")


def _read(path):
    with open(path, encoding="utf-8") as f:
        return f.read()


def _source_files(top):
    for folder, _, names in os.walk(os.path.join(ROOT, top)):
        for name in names:
            if name.endswith(SOURCE_SUFFIXES):
                yield os.path.join(folder, name)


def test_readme_is_a_front_page_under_300_lines():
    assert len(_read(README).splitlines()) < 300


def test_readme_lists_every_setting():
    """Every MPIGRAPH_* variable config.py declares is in README.md's options table, with the
    default `mpigraph config` prints."""
    text = _read(README)
    declared = re.findall(r'Setting\(\s*"(MPIGRAPH_\w+)"', _read(os.path.join(ROOT, "mpigraph", "config.py")))
    assert len(declared) >= len(config.SETTINGS)
    missing = [name for name in declared if not re.search(r"\b%s\b" % name, text)]
    assert not missing, "README.md's options table lacks %s" % missing
    rows = {cells[0].strip(): html.unescape(cells[1]) for cells in
            (line.strip("|").split(" | ") for line in text.splitlines() if line.startswith("| MPIGRAPH_"))}
    for setting in list(config.SETTINGS) + list(getattr(config, "TOOL_SETTINGS", [])):
        assert rows.get(setting.name, "").strip() == setting.default, (setting.name, setting.default)


def test_outputs_doc_is_made_from_the_schema():
    sys.path.insert(0, os.path.join(ROOT, "scripts"))
    try:
        import make_outputs_doc
    finally:
        sys.path.pop(0)
    expected = make_outputs_doc.render(*make_outputs_doc.load())
    assert _read(os.path.join(ROOT, "docs", "outputs.md")) == expected, \
        "docs/outputs.md is out of date: run python scripts/make_outputs_doc.py"
    from mpigraph import schema
    for list_name in make_outputs_doc.column_lists(schema):     # every column documented
        for column in getattr(schema, list_name):
            assert "`%s" % column.name in expected


def _commit_ids():
    if shutil.which("git") is None or not os.path.exists(os.path.join(ROOT, ".git")):
        pytest.skip("not a git checkout: no commit ids to look for")
    out = subprocess.run(["git", "-C", ROOT, "log", "--format=%H"], capture_output=True, text=True, check=True)
    return out.stdout.split()


def test_no_source_file_names_a_commit_of_this_repository():
    commits = _commit_ids()
    assert commits
    by_prefix = {c[:7] for c in commits}
    found = []
    for path in _source_files("mpigraph"):
        for match in re.finditer(r"\b[0-9a-f]{7,40}\b", _read(path)):
            token = match.group()
            if token[:7] in by_prefix and any(c.startswith(token) for c in commits):
                found.append("%s: %s" % (os.path.relpath(path, ROOT), token))
    assert not found, "comments say why, not which commit: %s" % found


def test_no_docstring_points_to_a_missing_design_md():
    """The design document is docs/design.md; the repository has no DESIGN.md."""
    assert os.path.exists(os.path.join(ROOT, "docs", "design.md"))
    stale = [os.path.relpath(p, ROOT) for p in _source_files("mpigraph") if "DESIGN.md" in _read(p)]
    assert not stale


def test_docs_links_to_repository_files_resolve():
    for name in ["README.md"] + ["docs/" + n for n in os.listdir(os.path.join(ROOT, "docs")) if n.endswith(".md")]:
        path = os.path.join(ROOT, name)
        for target in re.findall(r"\]\(([^)#:]+)(?:#[^)]*)?\)", _read(path)):
            assert os.path.exists(os.path.normpath(os.path.join(os.path.dirname(path), target))), (name, target)


# ---- the example run of docs/concepts.md: the numbers the document quotes, derived there by hand ----

MS = 1_000_000


def _analysed(tmp_path_factory, example):
    """The report tables of one run of scripts/concepts_example.py, as Python lists."""
    sys.path.insert(0, os.path.join(ROOT, "scripts"))
    try:
        import concepts_example
    finally:
        sys.path.pop(0)
    run_dir = str(tmp_path_factory.mktemp("concepts-" + example))
    concepts_example.analyse(concepts_example.write_logs(run_dir, example))
    import pyarrow.parquet as pq

    return {name: pq.read_table(os.path.join(run_dir, name + ".parquet")).to_pydict()
            for name in ("ranks", "calls", "collectives", "waitstates", "critical_path")}


@pytest.fixture(scope="module")
def concepts_run(tmp_path_factory):
    return _analysed(tmp_path_factory, "main")


@pytest.fixture(scope="module")
def nonblocking_run(tmp_path_factory):
    return _analysed(tmp_path_factory, "nonblocking")


@pytest.fixture(scope="module")
def scan_run(tmp_path_factory):
    return _analysed(tmp_path_factory, "scan")


def _ms(ns):
    return [round(v / MS, 6) for v in ns]


def _call_of(run):
    """call(rank, k) -> (wait state, its time, [wait_before, wait_after, execution]) in ms."""
    calls = run["calls"]
    row = {(r, c): i for i, (r, c) in enumerate(zip(calls["rank"], calls["call"]))}

    def call(rank, k):
        i = row[(rank, k)]
        return (calls["wait_state"][i], round(calls["wait_state_time_ns"][i] / MS, 6),
                _ms([calls["wait_before_ns"][i], calls["wait_after_ns"][i], calls["execution_ns"][i]]))
    return call


def _instance(run, function):
    """The one collective instance of `function`: {column: value}, times in ms."""
    inst = run["collectives"]
    assert inst["function"].count(function) == 1
    i = inst["function"].index(function)
    return {name: (round(col[i] / MS, 6) if name.endswith("_ns") else col[i]) for name, col in inst.items()}


def _path(run):
    path = run["critical_path"]
    return list(zip(path["rank"], path["kind"], path["function"], path["peer"], _ms(path["start_ns"]),
                    _ms(path["end_ns"])))


def test_concepts_example_rank_times(concepts_run):
    """docs/concepts.md: program time, MPI time, compute, wait, execution, imbalance per rank
    (if the definitions change, change the document with them)."""
    ranks = concepts_run["ranks"]
    assert _ms(ranks["program_time_ns"]) == [20, 20, 20]
    assert _ms(ranks["mpi_time_ns"]) == [6.6, 8.7, 3.75]
    assert _ms(ranks["compute_ns"]) == [13.4, 11.3, 16.25]
    # rank 0: Allreduce 3 + Reduce root 2 + Barrier 1; rank 1: Recv 3 + Allreduce 3 + 0.1 after
    # + Bcast 1 + Barrier 0.5 (its Reduce, a non-root, waits 0); rank 2: Allreduce 0.05 after +
    # Bcast 1 + Send 2 (its Reduce and Barrier: it arrived last).
    assert _ms(ranks["wait_ns"]) == [6.0, 7.6, 3.05]
    assert _ms(ranks["wait_after_ns"]) == [0, 0.1, 0.05]
    # MPI time - wait, never negative: 0.1 + 0.2 + 0.1 + 0.1 + 0.1; 0.3 + 0.2 + 0.1 + 0.1 + 0.1 + 0.3;
    # 0.2 + 0.1 + 0.1 + 0.1 + 0.2.
    assert _ms(ranks["execution_ns"]) == [0.6, 1.1, 0.7]
    # wait / (wait + execution + compute), here wait / program time.
    assert ranks["imbalance"] == pytest.approx([6 / 20, 7.6 / 20, 3.05 / 20])
    assert _ms(ranks["early_reduce_ns"]) == [2, 0, 0]                # only the root
    assert _ms(ranks["late_broadcast_ns"]) == [0, 1, 1]              # only the non-roots
    assert _ms(ranks["time_on_path_ns"]) == [7, 0, 13]


def test_concepts_example_waits_and_states(concepts_run):
    call = _call_of(concepts_run)
    assert call(1, 1) == ("late_sender", 3, [3, 0, 0.3])             # Recv 1-4.3, send at 4
    assert call(2, 5) == ("late_receiver", 2, [2, 0, 0.2])           # Send 16-18.2, receive at 18
    assert call(0, 1) == ("", 0, [0, 0, 0.1])                        # the eager Send
    assert call(0, 2) == ("wait_nxn", 3, [3, 0, 0.2])                # Allreduce: last arrival 8, min end 8.2
    assert call(1, 2) == ("wait_nxn", 3, [3, 0.1, 0.2])
    assert call(2, 1) == ("", 0, [0, 0.05, 0.2])
    assert call(0, 5)[:2] == ("wait_barrier", 1) and call(1, 5)[:2] == ("wait_barrier", 0.5)
    assert call(1, 3) == ("late_broadcast", 1, [1, 0, 0.1])          # Bcast 9-10.1, root at 10
    assert call(2, 2) == ("late_broadcast", 1, [1, 0, 0.1])
    assert call(0, 3) == ("", 0, [0, 0, 0.1])                        # the Bcast's root waits for no one
    assert call(0, 4) == ("early_reduce", 2, [2, 0, 0.1])            # the Reduce's root: 13 - 11
    assert call(1, 4) == ("", 0, [0, 0, 0.1])                        # its non-roots wait for no one
    assert call(2, 3) == ("", 0, [0, 0, 0.1])
    on_path = {(r, c) for r, c, p in zip(concepts_run["calls"]["rank"], concepts_run["calls"]["call"],
                                         concepts_run["calls"]["on_path"]) if p}
    assert on_path == {(0, 2), (0, 3), (0, 5), (2, 1), (2, 2), (2, 3), (2, 4)}


def test_concepts_example_collective_instances(concepts_run):
    """Per instance: time_total the members' durations, wait_total their waits by the pattern,
    imbalance = wait_total / time_total; the seed's barrier formulas in seed_* columns."""
    allreduce = _instance(concepts_run, "MPI_Allreduce")
    assert allreduce["time_total_ns"] == 6.75                        # 3.2 + 3.3 + 0.25
    assert allreduce["wait_total_ns"] == 6.15                        # 3 + 3.1 + 0.05
    assert allreduce["execution_ns"] == 0.6
    assert allreduce["imbalance"] == pytest.approx(6.15 / 6.75)
    assert allreduce["seed_execution_ns"] == 0.2                     # min end 8.2 - max start 8
    assert allreduce["seed_imbalance"] == pytest.approx(6.15 / 0.6)  # 1025%: not a share
    bcast = _instance(concepts_run, "MPI_Bcast")
    assert (bcast["time_total_ns"], bcast["wait_total_ns"]) == (2.3, 2)      # 0.1 + 1.1 + 1.1; 1 + 1
    assert bcast["imbalance"] == pytest.approx(2 / 2.3)
    reduce = _instance(concepts_run, "MPI_Reduce")
    assert (reduce["time_total_ns"], reduce["wait_total_ns"], reduce["execution_ns"]) == (2.3, 2, 0.3)
    assert reduce["imbalance"] == pytest.approx(2 / 2.3)
    assert reduce["seed_execution_ns"] == -0.9                       # 12.1 - 13
    assert reduce["seed_wait_total_ns"] == 5                         # 2 + 1 + 0 before, 1 + 0 + 1 after
    assert reduce["seed_imbalance"] is None                          # empty: seed execution <= 0
    barrier = _instance(concepts_run, "MPI_Barrier")
    assert (barrier["time_total_ns"], barrier["wait_total_ns"]) == (1.8, 1.5)  # 1.1 + 0.6 + 0.1; 1 + 0.5
    assert barrier["imbalance"] == pytest.approx(1.5 / 1.8)


def test_concepts_nonblocking_collective(nonblocking_run):
    """Iallreduce posts at 1, 2 and 6, Waits from 3, 2.5 and 6.1: each Wait waits for the last post."""
    call = _call_of(nonblocking_run)
    for rank in range(3):
        assert call(rank, 1) == ("", 0, [0, 0, 0.1])                 # the Iallreduce: all execution
    assert call(0, 2) == ("wait_nxn", 3, [3, 0, 0.2])                # Wait 3-6.2: 6 - 3
    assert call(1, 2) == ("wait_nxn", 3.5, [3.5, 0, 0.3])            # Wait 2.5-6.3: 6 - 2.5
    assert call(2, 2) == ("", 0, [0, 0, 0.1])                        # Wait 6.1-6.2: after the last post
    inst = _instance(nonblocking_run, "MPI_Iallreduce")
    assert (inst["members"], inst["max_start_ns"], inst["min_end_ns"]) == (3, 6, 6.2)   # min end of the Waits
    assert (inst["time_total_ns"], inst["wait_total_ns"], inst["execution_ns"]) == (7.1, 6.5, 0.6)
    assert inst["imbalance"] == pytest.approx(6.5 / 7.1)
    assert _path(nonblocking_run) == [(2, "compute", "", -1, 0, 6), (0, "message", "MPI_Wait", 2, 6, 6.2),
                                      (0, "compute", "", -1, 6.2, 8)]


def test_concepts_scan(scan_run):
    """MPI_Scan at 2 (rank 0), 4 (rank 1), 1 (rank 2): rank i waits for the latest of ranks < i."""
    call = _call_of(scan_run)
    assert call(0, 1) == ("", 0, [0, 0, 0.1])                        # no lower rank
    assert call(1, 1) == ("", 0, [0, 0, 0.2])                        # rank 0 came first, at 2
    assert call(2, 1) == ("early_scan", 3, [3, 0, 0.3])              # the later of 2 and 4: 4 - 1
    assert _ms(scan_run["ranks"]["early_scan_ns"]) == [0, 0, 3]
    inst = _instance(scan_run, "MPI_Scan")
    assert (inst["time_total_ns"], inst["wait_total_ns"], inst["execution_ns"]) == (3.6, 3, 0.6)
    assert inst["imbalance"] == pytest.approx(3 / 3.6)
    assert inst["seed_execution_ns"] == -1.9                         # min end 2.1 - max start 4


def test_concepts_example_critical_path(concepts_run):
    assert _path(concepts_run) == [
        (2, "compute", "", -1, 0, 8), (0, "message", "MPI_Allreduce", 2, 8, 8.2),
        (0, "compute", "", -1, 8.2, 10), (2, "message", "MPI_Bcast", 0, 10, 10.1),
        (2, "compute", "", -1, 10.1, 13), (2, "mpi", "MPI_Reduce", -1, 13, 13.1),
        (2, "compute", "", -1, 13.1, 15), (0, "message", "MPI_Barrier", 2, 15, 15.1),
        (0, "compute", "", -1, 15.1, 20)]
