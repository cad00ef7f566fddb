"""`mpigraph include`: where the phase API's C header and Fortran module are (mpigraph/include)."""

import os

INCLUDE_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "include")


def cmd_include(args) -> int:
    print(INCLUDE_DIR)
    return 0


def add_parser(subparsers) -> None:
    p = subparsers.add_parser("include", help="print the directory of mpigraph.h and mpigraph.f90, the phase API "
                                              "(cc -I\"$(mpigraph include)\")")
    p.set_defaults(func=cmd_include)
