"""The first lines of summary.txt: why the run is slow, in words, from the report's own tables.

Each sentence is made from tables the report writes anyway, and only when its
numbers carry it (the thresholds below); a run where none does gets a sentence
that says no rank holds the others up.

- A late rank at a collective.  The N-to-N instances (no root: Allreduce,
  Barrier, Allgather, ...) of collectives.parquet, per function: the rank
  whose late arrivals made the others wait most is named when that is at
  least LATE_RANK_SHARE of the function's wait, it was last at that share of
  the instances too (and far more often than chance: by_chance; at least
  twice), and the others' wait
  in those instances is at least NOTABLE_SHARE of their summed program time
  (a busy node delays ranks at random: one long delay is not a late rank).  Per
  instance the others waited wait_total (the last one waits 0), so it came
  wait_total / (members - 1) after the others on average.  Spread evenly over
  the members, the work that made it late would end each instance at the
  members' mean arrival instead of the last: wait_total / members earlier,
  summed over the instances, is what balancing would save.  "It computes more"
  is said only when the ranks table's compute of that rank exceeds the
  others' mean by at least half of its summed lateness (per call: over all
  the function's instances, as every rank computes before each).
- Late senders and late receivers (waitstates.csv), per function: named when
  their summed time is at least NOTABLE_SHARE of the waiting ranks' summed
  program time.
- The critical path: the ranks holding most of it (time_on_path of ranks.csv).

Where the report has the call-site table (callsites.csv), the first mention of a function
names its call site ("MPI_Allreduce at solver.c:212"): the site with most of the function's
wait, alone when it has all of it (SITE_ALL), else with its share.
"""

import textwrap

import numpy as np

LATE_RANK_SHARE = 0.5      # the share of a function's wait (and calls) a late rank must cause (be last at)
CHANCE_SIGMAS = 3.0       # a late rank is last this many standard deviations above chance
NOTABLE_SHARE = 0.05       # a wait worth a sentence: this share of the waiting ranks' program time
MAX_SENTENCES = 4
WIDTH = 100              # the diagnosis is wrapped to this many columns
SITE_ALL = 0.995           # a call site with this share of its function's wait is named alone


def _s(ns):
    return "%.3g s" % (ns / 1e9) if ns >= 1e9 else "%.3g ms" % (ns / 1e6)


def _ms(ns):
    return "%.3g ms" % (ns / 1e6)


def _pct(part, whole):
    return "%.0f%%" % (100.0 * part / whole) if whole > 0 else "-"


def rank_list(ranks, limit=6):
    """"0-2, 5" for [0, 1, 2, 5]; past `limit` runs, the first ones and the count."""
    ranks = sorted(int(r) for r in ranks)
    parts, i = [], 0
    while i < len(ranks):
        j = i
        while j + 1 < len(ranks) and ranks[j + 1] == ranks[j] + 1:
            j += 1
        parts.append(str(ranks[i]) if i == j else "%d%s%d" % (ranks[i], "-" if j > i + 1 else ", ", ranks[j]))
        i = j + 1
    if len(parts) > limit:
        return "%s, ... (%d ranks)" % (", ".join(parts[:limit]), len(ranks))
    return ", ".join(parts)


def _program_of(ranks, which):
    at = np.isin(ranks["rank"], np.asarray(list(which)))
    return int(ranks["program_time"][at].sum())


def by_chance(instances, members):
    """The most instances one rank is last at by chance: if each of `members` ranks were last
    at random (p = 1 / members), the count is binomial; its mean plus CHANCE_SIGMAS standard
    deviations is exceeded by chance about once in a thousand functions."""
    p = 1.0 / members
    return instances * p + CHANCE_SIGMAS * np.sqrt(instances * p * (1.0 - p))


def site_place(sites, function):
    """Where `function`'s wait is, in words to put after its name: " at solver.c:212" (or " in
    exchange" without -g) for the call site with most of it; " (70% at solver.c:212)" when other
    sites of the function waited too; "" without the call-site table or a known site."""
    if sites is None:
        return ""
    mine = np.flatnonzero((np.asarray(sites["function"], object) == function) & (np.asarray(sites["callsite"]) > 0))
    if not len(mine):
        return ""
    weight = np.asarray(sites["wait"], np.int64)[mine]
    if weight.sum() <= 0:
        weight = np.asarray(sites["time"], np.int64)[mine]
    top = mine[np.argmax(weight)]       # the first among equals: the table's order (longest time first)
    place = str(sites["name"][top])[len(function):]
    share = weight.max() / weight.sum() if weight.sum() > 0 else 1.0
    return place if share >= SITE_ALL else " (%s%s)" % (_pct(weight.max(), weight.sum()), place)


def late_rank_sentences(ranks, collectives, run_time, sites=None):
    """[(the others' wait ns, sentence)] of the late ranks at N-to-N collectives (module doc);
    `sites`: the callsites table (None: functions alone)."""
    out = []
    n_to_n = (collectives["root"] < 0) & (collectives["members"] > 1) & (collectives["last_rank"] >= 0)
    for function in np.unique(collectives["function"][n_to_n]):       # a loop over functions
        mine = n_to_n & (collectives["function"] == function)
        last = collectives["last_rank"][mine]
        wait = collectives["wait_total"][mine].astype(np.int64)
        caused = np.bincount(last, weights=wait)          # the others' wait, per rank that arrived last
        late = int(np.argmax(caused))
        held = last == late
        k, total = int(held.sum()), int(mine.sum())
        # Last at most of the calls, far more often than chance would make it, and the cause of
        # most of the wait: a busy node delays ranks at random, a late rank is late every time.
        if k < 2 or k < by_chance(total, float(collectives["members"][mine].mean())) \
                or k < LATE_RANK_SHARE * total or caused[late] < LATE_RANK_SHARE * wait.sum():
            continue
        members = collectives["members"][mine][held].astype(np.int64)
        others = [r for r in ranks["rank"].tolist() if r != late]
        waited = int(wait[held].sum())
        if waited < NOTABLE_SHARE * _program_of(ranks, others):
            continue
        if int(members.max()) < len(ranks["rank"]):
            who = "the other members"
        else:
            who = "rank%s %s" % ("s" if len(others) > 1 else "", rank_list(others))
        lateness = int((wait[held] / (members - 1)).sum())
        saved = int((wait[held] / members).sum())
        compute = ranks["compute"].astype(np.int64)
        at = ranks["rank"] == late
        extra = int(compute[at].sum()) - (float(compute[~at].mean()) if (~at).any() else 0.0)
        words = "rank %d " % late
        place = site_place(sites, function)
        if extra >= 0.5 * lateness:
            words += "computes %s more per %s%s than the others' mean (%s in all) and " % (
                _ms(extra / total), function, place, _s(extra))
            place = ""
        words += "arrives last at %d of %d %s calls%s, %s after the others on average; " % (
            k, total, function, place, _ms(lateness / k))
        words += "%s wait for it %s (%s of their %s wait, %s of their time). " % (
            who, _s(waited), _pct(waited, wait.sum()), function, _pct(waited, _program_of(ranks, others)))
        words += "Spread evenly over the ranks, its extra work would save about %s of the %s run (%s)." % (
            _s(saved), _s(run_time), _pct(saved, run_time))
        out.append((waited, words))
    return out


def message_sentences(ranks, waitstates, sites=None):
    """[(time ns, sentence)] of late senders and late receivers per function; `sites`: the
    callsites table (None: functions alone)."""
    out = []
    for kind, what in (("late_sender", "for messages sent late (late sender)"),
                       ("late_receiver", "for their receivers to post the receive (late receiver)")):
        rows = waitstates["kind"] == kind
        for function in np.unique(waitstates["function"][rows]):        # a loop over functions
            mine = rows & (waitstates["function"] == function)
            waiting = np.unique(waitstates["rank"][mine])
            time = int(waitstates["time"][mine].sum())
            if time < NOTABLE_SHARE * _program_of(ranks, waiting):
                continue
            out.append((time, "rank%s %s wait%s %s in %s%s %s, %s of their time." % (
                "s" if len(waiting) > 1 else "", rank_list(waiting), "" if len(waiting) > 1 else "s", _s(time),
                function, site_place(sites, function), what, _pct(time, _program_of(ranks, waiting)))))
    return out


def path_sentence(ranks):
    """Where the critical path runs, from ranks.csv's time_on_path (None without a path)."""
    on_path = ranks.get("time_on_path")
    if on_path is None or int(on_path.sum()) <= 0:
        return None
    total = int(on_path.sum())
    order = np.argsort(-on_path, kind="stable")[:3]
    shares = ", ".join("rank %d %s" % (ranks["rank"][i], _pct(on_path[i], total)) for i in order if on_path[i] > 0)
    return "The critical path (critical_path.parquet) runs through %s." % shares


def diagnosis_lines(ranks, linked, run_time):
    """The diagnosis paragraph: "Diagnosis:" and its sentences, the most waited-for first."""
    found = []
    if linked is not None:
        sites = linked.get("callsites")
        found += late_rank_sentences(ranks, linked["collectives"], run_time, sites)
        found += message_sentences(ranks, linked["waitstates"], sites)
    found.sort(key=lambda item: -item[0])
    sentences = [words for _, words in found[:MAX_SENTENCES]]
    if linked is not None and not sentences:
        wait = int(ranks["wait"].sum()) if "wait" in ranks else 0
        program = int(ranks["program_time"].sum())
        sentences.append("No rank holds the others up: no collective has one rank arriving last at most of its "
                         "calls with the others waiting %s or more of their time, and no late sender or receiver "
                         "waits that long (the ranks wait %s in all, %s of their time)."
                         % (_pct(NOTABLE_SHARE, 1), _s(wait), _pct(wait, program)))
    path = path_sentence(ranks)
    if path:
        sentences.append(path)
    if not sentences:
        return []
    wrap = lambda s: textwrap.wrap(s, WIDTH, initial_indent="- ", subsequent_indent="  ")  # noqa: E731
    return ["Diagnosis:"] + [line for s in sentences for line in wrap(s)]
