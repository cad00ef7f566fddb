! One-sided communication from Fortran 2008 (use mpi_f08): a window, ITERATIONS epochs of
! MPI_Put into the right neighbour between MPI_Win_fence calls, MPI_Win_free
! (tests/test_io_rma.py).  MPICH's f08 MPI_Win_fence and MPI_Win_free call PMPI directly:
! the shim's own bindings (csrc/fortran.c) record them.  Prints "rma_f08: rank R sum S".
program rma_f08
    use mpi_f08
    implicit none
    integer, parameter :: iterations = 5
    integer :: rank, nranks, it, total
    integer, asynchronous, target :: cell(1)
    integer :: mine(1)
    type(MPI_Win) :: win
    integer(kind=MPI_ADDRESS_KIND) :: wsize, disp

    call MPI_Init()
    call MPI_Comm_rank(MPI_COMM_WORLD, rank)
    call MPI_Comm_size(MPI_COMM_WORLD, nranks)
    cell = -1
    mine = rank
    total = 0
    wsize = 4
    disp = 0
    call MPI_Win_create(cell, wsize, 4, MPI_INFO_NULL, MPI_COMM_WORLD, win)
    call MPI_Win_fence(0, win)
    do it = 1, iterations
        call MPI_Put(mine, 1, MPI_INTEGER, mod(rank + 1, nranks), disp, 1, MPI_INTEGER, win)
        call MPI_Win_fence(0, win)
        call MPI_F_sync_reg(cell)
        total = total + cell(1)
    end do
    call MPI_Win_free(win)
    print '(a,i0,a,i0)', 'rma_f08: rank ', rank, ' sum ', total
    call MPI_Finalize()
end program rma_f08
