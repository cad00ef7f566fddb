"""match.releases: the latest partner by key (neighbourhood collectives, one-sided epochs).

Known answers by hand on one analysis rank (MPI_COMM_SELF: the rows meet where they are);
tests/test_neighbor_rma.py checks 2 analysis ranks against 1 on real runs."""

import numpy as np
from mpi4py import MPI

from mpigraph.match import releases


def table(**columns):
    return {name: np.asarray(values, np.int64) for name, values in columns.items()}


def test_each_row_gets_its_latest_partner():
    # partners: comm 7, seq 1, ranks 0..3 arriving at 10, 50, 30, 50 (ranks 1 and 3 tie)
    have = table(k0=[7, 7, 7, 7], k1=[1, 1, 1, 1], k2=[0, 1, 2, 3], k3=[0, 0, 0, 0],
                 rank=[0, 1, 2, 3], call=[5, 6, 7, 8], start=[10, 50, 30, 50])
    # row 0 waits for ranks 0 and 2; row 1 for 1 and 3 (a tie: the higher rank, as the last
    # arriver among equals); row 2 for rank 9, who never came; row 3 for nobody
    want = table(k0=[7, 7, 7, 7, 7], k1=[1, 1, 1, 1, 1], k2=[0, 2, 1, 3, 9], k3=[0] * 5, row=[0, 0, 1, 1, 2])
    rank, call, start = releases.latest(MPI.COMM_SELF, have, want, 4)
    assert rank.tolist() == [2, 3, -1, -1]
    assert call.tolist() == [7, 8, -1, -1]
    assert start.tolist() == [30, 50, -1, -1]


def test_keys_differ_in_any_column():
    have = table(k0=[1, 1], k1=[2, 2], k2=[3, 3], k3=[0, 1], rank=[4, 5], call=[0, 0], start=[100, 200])
    want = table(k0=[1], k1=[2], k2=[3], k3=[0], row=[0])
    assert releases.latest(MPI.COMM_SELF, have, want, 1)[0].tolist() == [4]


def test_owner_hash_is_the_same_for_the_same_key_and_spreads():
    keys = table(k0=np.arange(1000) % 7, k1=np.arange(1000), k2=np.zeros(1000), k3=np.zeros(1000))
    owner = releases.key_owner(keys, 4)
    assert (owner == releases.key_owner({k: v.copy() for k, v in keys.items()}, 4)).all()
    assert np.bincount(owner, minlength=4).min() > 150
