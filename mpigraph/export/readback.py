"""An OTF2 archive read back with the otf2 package: event counts and the communication matrix,
to check an export against the report it came from (and for users comparing tools)."""

import collections
import os

import numpy as np


def read(archive_dir):
    """({event class name: count}, {(src, dst): (messages, bytes)} of its MpiSend events, world ranks).

    A send's receiver is its rank in the event's communicator: mapped to a world rank through the
    communicator's group (otf2's Comm.location), then the location's rank (its index among the
    locations, as the export writes them: location r is world rank r)."""
    import otf2

    path = os.path.join(archive_dir, "traces.otf2")
    counts = collections.Counter()
    pairs = collections.defaultdict(lambda: [0, 0])
    with otf2.reader.open(path) as trace:
        rank_of = {loc: i for i, loc in enumerate(trace.definitions.locations)}
        for location, event in trace.events:
            counts[type(event).__name__] += 1
            if isinstance(event, otf2.events.MpiSend):
                dst = rank_of[event.communicator.location(event.receiver)]
                pair = pairs[(rank_of[location], dst)]
                pair[0] += 1
                pair[1] += event.msg_length
    return dict(counts), {k: tuple(v) for k, v in pairs.items()}


def matrix_dense(pairs, world_size):
    """(messages, bytes) world_size x world_size arrays of read's pairs."""
    messages = np.zeros((world_size, world_size), np.int64)
    nbytes = np.zeros((world_size, world_size), np.int64)
    for (s, d), (n, b) in pairs.items():
        messages[s, d], nbytes[s, d] = n, b
    return messages, nbytes
