"""Phases: the run split at each MPI_Pcontrol call (mpiP's levels) and at the named regions of the
phase API (mpigraph_phase_begin/_end from C, Fortran and Python); per-phase tables.

regions.py  a rank's marks -> segments keyed (Pcontrol phase, level, region path); the nesting rules
stage.py    the analysis stage: per-phase function sums and times, gathered and keyed on rank 0; --phase
share.py    the critical path's time per phase (path segments cut at the marks)
summary.py  summary.txt's phases section
api.py      mpigraph.phase / phase_begin / phase_end for Python programs (ctypes on the shim)
cli.py      `mpigraph include`: the directory of mpigraph.h and mpigraph.f90
"""
