"""A line now and then from a search that loops: which round it is at, after how long.

The round-based searches take as many rounds as their input asks for: parallel-dijkstra one
per crossing between analysis ranks on a shortest path (until it joins the parts on analysis
rank 0, which it does when they fit there), delta-stepping one light phase per
light edge along a shortest path inside a bucket (until it joins the parts in one Dijkstra
search, which it does when the phases have run about as long as that search would).  A
pipelined program (a message per row, each on the path) can ask for thousands of rounds or
millions of phases, where dijkstra and toposort take seconds: the line says so while it runs,
instead of a silent wait.
"""

import time

EVERY_S = 30.0      # seconds between two lines

HINTS = {
    "parallel-dijkstra": "a round per crossing between analysis ranks on a shortest path, until the parts "
                         "are joined and searched in one sweep over slabs of time (or on analysis rank 0 "
                         "where their times are out of order, when they fit there)",
    "delta-stepping": "a light phase per short edge along a shortest path, until they have taken about as "
                      "long as one Dijkstra search would",
    "parallel-delta-stepping": "a light phase per short edge along a shortest path, until they have taken "
                               "about as long as one search of the parts joined would, when those fit "
                               "analysis rank 0",
}


class Heartbeat:
    """tick() from a search's loop; `say(text)` (None: silent) gets a line every EVERY_S seconds."""

    def __init__(self, algorithm, say=None):
        self.algorithm, self.say = algorithm, say
        self.started = self.last = time.perf_counter()
        self.lines = 0

    def due(self):
        """Whether a tick now would print (a caller can skip working out its detail)."""
        return self.say is not None and time.perf_counter() - self.last >= EVERY_S

    def say_now(self, text):
        """A line at once (a change of course, not a count)."""
        if self.say is not None:
            self.say(text)

    def tick(self, rounds, what="rounds", detail=""):
        if not self.due():
            return
        now = self.last = time.perf_counter()
        text = "path: %s, %d %s after %.0f s%s" % (self.algorithm, rounds, what, now - self.started,
                                                   "; " + detail if detail else "")
        if not self.lines:
            text += " (%s: long pipelines need many; dijkstra and toposort do not)" % HINTS.get(
                self.algorithm, "rounds")
        self.lines += 1
        self.say(text)
