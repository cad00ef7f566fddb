! Call sites (tests/test_callsites.py): a Fortran program (use mpi) whose MPI_Allreduce is in
! the subroutine halo_step, called STEPS times per rank.  The test finds the line by "site:".
subroutine halo_step(v, total)
  use mpi
  implicit none
  double precision, intent(in) :: v
  double precision, intent(out) :: total
  integer :: ierr
  call MPI_Allreduce(v, total, 1, MPI_DOUBLE_PRECISION, MPI_SUM, MPI_COMM_WORLD, ierr) ! site: allreduce
end subroutine halo_step

program callsites
  use mpi
  implicit none
  integer, parameter :: steps = 6
  integer :: ierr, i
  double precision :: total, acc
  call MPI_Init(ierr)
  acc = 0
  do i = 1, steps
    call halo_step(dble(i), total)
    acc = acc + total
  end do
  call MPI_Finalize(ierr)
end program callsites
