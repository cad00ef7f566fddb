"""names.Labels: a str column as codes into names reads like the object array it stands for."""

import numpy as np

from mpigraph.util.names import Labels

NAMES = np.array(["compute", "mpi", "message", ""], object)


def test_labels_read_like_their_object_array():
    codes = np.array([1, 0, 1, 2, 3, 1], np.int8)
    labels, plain = Labels(codes, NAMES), NAMES[codes]
    assert len(labels) == 6 and labels[1] == "compute" and labels[3] == "message" and labels[-1] == "mpi"
    assert (labels == "mpi").tolist() == (plain == "mpi").tolist() == [True, False, True, False, False, True]
    assert not (labels == "absent").any() and (labels == plain).all()
    assert labels.tolist() == plain.tolist() and np.asarray(labels).tolist() == plain.tolist()
    assert "message" in labels and "" in labels and "absent" not in labels
    assert "message" not in Labels(codes[:2], NAMES)          # a name no row has
    assert list(labels) == plain.tolist()


def test_sums_count_only_the_names_rows_have():
    labels = Labels(np.array([1, 1, 2, 1], np.int16), NAMES)
    assert labels.sums(np.array([10, 20, 5, 1])) == {"mpi": 31, "message": 5}
    twice = Labels(np.array([0, 1, 0]), np.array(["MPI_Send", "MPI_Send"], object))
    assert twice.sums(np.array([1, 2, 4])) == {"MPI_Send": 7}
