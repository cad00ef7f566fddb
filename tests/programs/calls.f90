! calls.f90: a Fortran MPI program (`use mpi`) with an exactly known number of
! calls of each MPI function per rank, for mpigraph's integration tests.
!
!   mpif90 -o calls_f calls.f90 && mpiexec -n P ./calls_f      (P >= 2)
!
! Rank 0 prints lines that depend only on P.  The calls per rank are listed in
! tests/programs/expected.py (calls_f90), which mirrors the steps below.
program calls
  use mpi
  implicit none
  integer :: ierr, rank, nranks, left, right, half, hrank, hsize
  integer :: param, sbuf, rbuf, hsum, total, i
  integer :: nb_in(2), nb_out(2), reqs(4), w_in, w_out, req
  integer, allocatable :: checks(:)
  integer :: check
  integer, parameter :: tag = 11

  call MPI_Init(ierr)                                       ! Init 1
  call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)            ! Comm_rank 1
  call MPI_Comm_size(MPI_COMM_WORLD, nranks, ierr)          ! Comm_size 1
  right = mod(rank + 1, nranks)
  left = mod(rank + nranks - 1, nranks)
  check = 0

  ! 1. Bcast 1
  param = 0
  if (rank == 0) param = 42
  call MPI_Bcast(param, 1, MPI_INTEGER, 0, MPI_COMM_WORLD, ierr)
  check = check + param

  ! 2. Blocking ring: Send 1, Recv 1 (even ranks send first)
  sbuf = 100 + rank
  if (mod(rank, 2) == 0) then
    call MPI_Send(sbuf, 1, MPI_INTEGER, right, tag, MPI_COMM_WORLD, ierr)
    call MPI_Recv(rbuf, 1, MPI_INTEGER, left, tag, MPI_COMM_WORLD, MPI_STATUS_IGNORE, ierr)
  else
    call MPI_Recv(rbuf, 1, MPI_INTEGER, left, tag, MPI_COMM_WORLD, MPI_STATUS_IGNORE, ierr)
    call MPI_Send(sbuf, 1, MPI_INTEGER, right, tag, MPI_COMM_WORLD, ierr)
  end if
  check = check + rbuf

  ! 3. Nonblocking exchange with both neighbours: Irecv 2, Isend 2, Waitall 1
  nb_out(1) = rank
  nb_out(2) = -rank
  call MPI_Irecv(nb_in(1), 1, MPI_INTEGER, left, tag + 1, MPI_COMM_WORLD, reqs(1), ierr)
  call MPI_Irecv(nb_in(2), 1, MPI_INTEGER, right, tag + 2, MPI_COMM_WORLD, reqs(2), ierr)
  call MPI_Isend(nb_out(1), 1, MPI_INTEGER, right, tag + 1, MPI_COMM_WORLD, reqs(3), ierr)
  call MPI_Isend(nb_out(2), 1, MPI_INTEGER, left, tag + 2, MPI_COMM_WORLD, reqs(4), ierr)
  call MPI_Waitall(4, reqs, MPI_STATUSES_IGNORE, ierr)
  check = check + nb_in(1) - nb_in(2)

  ! 4. Irecv 1, Isend 1, Wait 2
  w_out = 7 * rank
  call MPI_Irecv(w_in, 1, MPI_INTEGER, left, tag + 3, MPI_COMM_WORLD, req, ierr)
  call MPI_Isend(w_out, 1, MPI_INTEGER, right, tag + 3, MPI_COMM_WORLD, reqs(1), ierr)
  call MPI_Wait(reqs(1), MPI_STATUS_IGNORE, ierr)
  call MPI_Wait(req, MPI_STATUS_IGNORE, ierr)
  check = check + w_in

  ! 5. Communicator split by parity: Comm_split 1, Comm_rank 1, Comm_size 1,
  !    Allreduce 1 (on the sub-communicator), Comm_free 1
  call MPI_Comm_split(MPI_COMM_WORLD, mod(rank, 2), rank, half, ierr)
  call MPI_Comm_rank(half, hrank, ierr)
  call MPI_Comm_size(half, hsize, ierr)
  call MPI_Allreduce(rank, hsum, 1, MPI_INTEGER, MPI_SUM, half, ierr)
  call MPI_Comm_free(half, ierr)
  check = check + 10 * hsum + 100 * hrank + hsize

  ! 6. Allreduce 1 on MPI_COMM_WORLD, Barrier 1, Gather 1
  call MPI_Allreduce(rank + 1, total, 1, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD, ierr)
  check = check + total
  call MPI_Barrier(MPI_COMM_WORLD, ierr)
  allocate(checks(nranks))
  call MPI_Gather(check, 1, MPI_INTEGER, checks, 1, MPI_INTEGER, 0, MPI_COMM_WORLD, ierr)
  if (rank == 0) then
    write(*, '(a, i0, a)') 'calls_f: ', nranks, ' ranks'
    do i = 1, nranks
      write(*, '(a, i0, a, i0)') 'calls_f: rank ', i - 1, ' checksum ', checks(i)
    end do
  end if
  call MPI_Finalize(ierr)                                   ! Finalize 1
end program calls
