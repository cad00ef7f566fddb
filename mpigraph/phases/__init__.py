"""Phases: the run split at each MPI_Pcontrol call (mpiP's levels), per-phase tables.

stage.py  the analysis stage: per-phase function sums on each analysis rank, added on rank 0
"""
