! Named regions from Fortran (tests/test_regions.py), through the module mpigraph_phases
! (mpigraph/include/mpigraph.f90): "short" (SHORT_MS of CPU work, an Allreduce), then "long"
! (LONG_MS of CPU work, an Allreduce).  Rank 0 prints "regions ok".
program regions
  use mpi
  use mpigraph_phases
  implicit none
  integer, parameter :: SHORT_MS = 20, LONG_MS = 300
  integer :: ierr, rank
  double precision :: x, y

  call MPI_Init(ierr)
  call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)

  call mpigraph_phase_begin("short")
  x = busy(SHORT_MS)
  call MPI_Allreduce(x, y, 1, MPI_DOUBLE_PRECISION, MPI_SUM, MPI_COMM_WORLD, ierr)
  call mpigraph_phase_end("short")

  call mpigraph_phase_begin("long")
  x = busy(LONG_MS)
  call MPI_Allreduce(x, y, 1, MPI_DOUBLE_PRECISION, MPI_SUM, MPI_COMM_WORLD, ierr)
  call mpigraph_phase_end("long")

  call MPI_Finalize(ierr)
  if (rank == 0) print '(a)', "regions ok"

contains

  ! Spin (no sleep) until the wall clock has moved on by `ms` milliseconds.
  double precision function busy(ms)
    integer, intent(in) :: ms
    double precision :: t0
    integer :: i
    busy = 0
    t0 = MPI_Wtime()
    do
      do i = 1, 1000
        busy = busy + 1d-9 * i
      end do
      if ((MPI_Wtime() - t0) * 1000 >= ms) exit
    end do
  end function
end program
