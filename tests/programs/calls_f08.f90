! calls_f08.f90: calls.f90 written with the Fortran 2008 bindings (`use
! mpi_f08`), for mpigraph's integration tests.  Same steps, same calls per
! rank and the same output as calls.f90 (see tests/programs/expected.py).
!
!   mpif90 -o calls_f08 calls_f08.f90 && mpiexec -n P ./calls_f08   (P >= 2)
program calls_f08
  use mpi_f08
  implicit none
  integer :: rank, nranks, left, right, hrank, hsize
  integer :: param, sbuf, rbuf, hsum, total, i, one
  integer :: nb_in(2), nb_out(2), w_in, w_out
  type(MPI_Comm) :: half
  type(MPI_Request) :: reqs(4), req
  integer, allocatable :: checks(:)
  integer :: check
  integer, parameter :: tag = 11

  call MPI_Init()                                           ! Init 1
  call MPI_Comm_rank(MPI_COMM_WORLD, rank)                  ! Comm_rank 1
  call MPI_Comm_size(MPI_COMM_WORLD, nranks)                ! Comm_size 1
  right = mod(rank + 1, nranks)
  left = mod(rank + nranks - 1, nranks)
  check = 0

  ! 1. Bcast 1
  param = 0
  if (rank == 0) param = 42
  call MPI_Bcast(param, 1, MPI_INTEGER, 0, MPI_COMM_WORLD)
  check = check + param

  ! 2. Blocking ring: Send 1, Recv 1 (even ranks send first)
  sbuf = 100 + rank
  if (mod(rank, 2) == 0) then
    call MPI_Send(sbuf, 1, MPI_INTEGER, right, tag, MPI_COMM_WORLD)
    call MPI_Recv(rbuf, 1, MPI_INTEGER, left, tag, MPI_COMM_WORLD, MPI_STATUS_IGNORE)
  else
    call MPI_Recv(rbuf, 1, MPI_INTEGER, left, tag, MPI_COMM_WORLD, MPI_STATUS_IGNORE)
    call MPI_Send(sbuf, 1, MPI_INTEGER, right, tag, MPI_COMM_WORLD)
  end if
  check = check + rbuf

  ! 3. Nonblocking exchange with both neighbours: Irecv 2, Isend 2, Waitall 1
  nb_out(1) = rank
  nb_out(2) = -rank
  call MPI_Irecv(nb_in(1), 1, MPI_INTEGER, left, tag + 1, MPI_COMM_WORLD, reqs(1))
  call MPI_Irecv(nb_in(2), 1, MPI_INTEGER, right, tag + 2, MPI_COMM_WORLD, reqs(2))
  call MPI_Isend(nb_out(1), 1, MPI_INTEGER, right, tag + 1, MPI_COMM_WORLD, reqs(3))
  call MPI_Isend(nb_out(2), 1, MPI_INTEGER, left, tag + 2, MPI_COMM_WORLD, reqs(4))
  call MPI_Waitall(4, reqs, MPI_STATUSES_IGNORE)
  check = check + nb_in(1) - nb_in(2)

  ! 4. Irecv 1, Isend 1, Wait 2
  w_out = 7 * rank
  call MPI_Irecv(w_in, 1, MPI_INTEGER, left, tag + 3, MPI_COMM_WORLD, req)
  call MPI_Isend(w_out, 1, MPI_INTEGER, right, tag + 3, MPI_COMM_WORLD, reqs(1))
  call MPI_Wait(reqs(1), MPI_STATUS_IGNORE)
  call MPI_Wait(req, MPI_STATUS_IGNORE)
  check = check + w_in

  ! 5. Communicator split by parity: Comm_split 1, Comm_rank 1, Comm_size 1,
  !    Allreduce 1 (on the sub-communicator), Comm_free 1
  call MPI_Comm_split(MPI_COMM_WORLD, mod(rank, 2), rank, half)
  call MPI_Comm_rank(half, hrank)
  call MPI_Comm_size(half, hsize)
  call MPI_Allreduce(rank, hsum, 1, MPI_INTEGER, MPI_SUM, half)
  call MPI_Comm_free(half)
  check = check + 10 * hsum + 100 * hrank + hsize

  ! 6. Allreduce 1 on MPI_COMM_WORLD, Barrier 1, Gather 1
  one = rank + 1
  call MPI_Allreduce(one, total, 1, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD)
  check = check + total
  call MPI_Barrier(MPI_COMM_WORLD)
  allocate(checks(nranks))
  call MPI_Gather(check, 1, MPI_INTEGER, checks, 1, MPI_INTEGER, 0, MPI_COMM_WORLD)
  if (rank == 0) then
    write(*, '(a, i0, a)') 'calls_f: ', nranks, ' ranks'
    do i = 1, nranks
      write(*, '(a, i0, a, i0)') 'calls_f: rank ', i - 1, ' checksum ', checks(i)
    end do
  end if
  call MPI_Finalize()                                       ! Finalize 1
end program calls_f08
