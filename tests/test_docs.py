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


@pytest.fixture(scope="module")
def concepts_run(tmp_path_factory):
    sys.path.insert(0, os.path.join(ROOT, "scripts"))
    try:
        import concepts_example
    finally:
        sys.path.pop(0)
    run_dir = str(tmp_path_factory.mktemp("concepts"))
    concepts_example.analyse(concepts_example.write_logs(run_dir))
    import pyarrow.parquet as pq

    return {name: pq.read_table(os.path.join(run_dir, name + ".parquet")).to_pydict()
            for name in ("ranks", "calls", "collectives", "waitstates", "critical_path")}


def _ms(ns):
    return [round(v / MS, 6) for v in ns]


def test_concepts_example_rank_times(concepts_run):
    """docs/concepts.md: program time, MPI time, compute, wait, execution, imbalance per rank
    (if the definitions change, change the document with them)."""
    ranks = concepts_run["ranks"]
    assert _ms(ranks["program_time_ns"]) == [20, 20, 20]
    assert _ms(ranks["mpi_time_ns"]) == [6.6, 8.7, 3.75]
    assert _ms(ranks["compute_ns"]) == [13.4, 11.3, 16.25]
    assert _ms(ranks["wait_ns"]) == [7.0, 8.6, 4.05]
    assert _ms(ranks["execution_ns"]) == [-0.4, 0.1, -0.3]
    assert ranks["imbalance"] == pytest.approx([7 / 13, 8.6 / 11.4, 4.05 / 15.95])
    assert _ms(ranks["time_on_path_ns"]) == [7, 0, 13]


def test_concepts_example_waits_and_states(concepts_run):
    calls = concepts_run["calls"]
    row = {(r, c): i for i, (r, c) in enumerate(zip(calls["rank"], calls["call"]))}

    def call(rank, k):
        i = row[(rank, k)]
        return (calls["wait_state"][i], round(calls["wait_state_time_ns"][i] / MS, 6),
                _ms([calls["wait_before_ns"][i], calls["wait_after_ns"][i], calls["execution_ns"][i]]))

    assert call(1, 1) == ("late_sender", 3, [3, 0, 0.3])             # Recv 1-4.3, send at 4
    assert call(2, 5) == ("late_receiver", 2, [2, 0, 0.2])           # Send 16-18.2, receive at 18
    assert call(0, 1) == ("", 0, [0, 0, 0.1])                        # the eager Send
    assert call(0, 2) == ("wait_nxn", 3, [3, 0, 0.2])                # Allreduce
    assert call(1, 2) == ("wait_nxn", 3, [3, 0.1, 0.2])
    assert call(2, 1) == ("", 0, [0, 0.05, 0.2])
    assert call(0, 5)[:2] == ("wait_barrier", 1) and call(1, 5)[:2] == ("wait_barrier", 0.5)
    assert call(1, 3)[:2] == ("late_broadcast", 1) and call(2, 2)[:2] == ("late_broadcast", 1)
    assert call(0, 3)[:2] == ("", 0)                                 # the Bcast's root
    assert call(0, 4) == ("early_reduce", 2, [2, 1, -0.9])           # the Reduce's root
    inst = concepts_run["collectives"]
    allreduce = inst["function"].index("MPI_Allreduce")
    assert round(inst["wait_total_ns"][allreduce] / MS, 6) == 6.15
    assert inst["imbalance"][allreduce] == pytest.approx(6.15 / 0.6)
    on_path = {(r, c) for r, c, p in zip(calls["rank"], calls["call"], calls["on_path"]) if p}
    assert on_path == {(0, 2), (0, 3), (0, 5), (2, 1), (2, 2), (2, 3), (2, 4)}


def test_concepts_example_critical_path(concepts_run):
    path = concepts_run["critical_path"]
    got = list(zip(path["rank"], path["kind"], path["function"], path["peer"], _ms(path["start_ns"]),
                   _ms(path["end_ns"])))
    assert got == [(2, "compute", "", -1, 0, 8), (0, "message", "MPI_Allreduce", 2, 8, 8.2),
                   (0, "compute", "", -1, 8.2, 10), (2, "message", "MPI_Bcast", 0, 10, 10.1),
                   (2, "compute", "", -1, 10.1, 13), (2, "mpi", "MPI_Reduce", -1, 13, 13.1),
                   (2, "compute", "", -1, 13.1, 15), (0, "message", "MPI_Barrier", 2, 15, 15.1),
                   (0, "compute", "", -1, 15.1, 20)]
