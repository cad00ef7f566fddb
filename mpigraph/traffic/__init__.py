"""Who sends how much to whom: the communication matrix, message-size histograms and the
communicators' table (issue 32).

communicators.py  the communicators a run created, their members and names
matrix.py         rank x rank messages and bytes (point-to-point and collectives apportioned)
sizes.py          message-size histograms per MPI function and communicator (powers of two)
heatmap.py        commmatrix.svg
stage.py          the analysis stage: local tables on each analysis rank, gathered to rank 0
"""
