! mpigraph's phase API for Fortran programs: name the regions of a run.
!
!     gfortran -c "$(mpigraph include)/mpigraph.f90"     (once: mpigraph.o, mpigraph_phases.mod)
!     mpif90 app.f90 mpigraph.o
!
!     use mpigraph_phases
!     call mpigraph_phase_begin("solve")
!     ...
!     call mpigraph_phase_end("solve")
!
! The same calls as the C API (mpigraph.h): under mpigraph (its shim LD_PRELOADed) each is a
! record of its own; without the shim they do nothing.  The shim's functions are looked up once
! with dlsym in the process's global scope (glibc before 2.34 needs -ldl at link time).
! Trailing blanks of a name are dropped; call mpigraph_phase_end() without a name to close the
! innermost open region.
module mpigraph_phases
  use, intrinsic :: iso_c_binding
  implicit none
  private
  public :: mpigraph_phase_begin, mpigraph_phase_end

  abstract interface
    subroutine phase_fn(name) bind(C)
      import :: c_char
      character(kind=c_char), dimension(*), intent(in) :: name
    end subroutine
  end interface

  interface
    function dlsym(handle, symbol) bind(C, name="dlsym")
      import :: c_ptr, c_funptr, c_char
      type(c_ptr), value :: handle
      character(kind=c_char), dimension(*), intent(in) :: symbol
      type(c_funptr) :: dlsym
    end function
  end interface

  ! 0: not looked up yet, 1: the shim is there, 2: it is not.
  integer, save :: state = 0
  procedure(phase_fn), pointer, save :: begin_fn => null(), end_fn => null()

contains

  subroutine resolve()
    type(c_funptr) :: f
    ! glibc's RTLD_DEFAULT is the null handle: the global scope, where LD_PRELOAD puts the shim.
    state = 2
    f = dlsym(c_null_ptr, "mpigraph_phase_begin" // c_null_char)
    if (.not. c_associated(f)) return
    call c_f_procpointer(f, begin_fn)
    f = dlsym(c_null_ptr, "mpigraph_phase_end" // c_null_char)
    if (.not. c_associated(f)) return
    call c_f_procpointer(f, end_fn)
    state = 1
  end subroutine

  subroutine mpigraph_phase_begin(name)
    character(len=*), intent(in) :: name
    if (state == 0) call resolve()
    if (state == 1) call begin_fn(trim(name) // c_null_char)
  end subroutine

  subroutine mpigraph_phase_end(name)
    character(len=*), intent(in), optional :: name
    if (state == 0) call resolve()
    if (state /= 1) return
    if (present(name)) then
      call end_fn(trim(name) // c_null_char)
    else
      ! An empty name (the C API's NULL) closes the innermost open region.
      call end_fn(c_null_char)
    end if
  end subroutine
end module
