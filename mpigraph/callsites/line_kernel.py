"""A compile unit's DWARF line program decoded in C: its rows' addresses, files and lines.

pyelftools decodes a line program an opcode at a time in Python, 14 us a row: a program built
with -g has hundreds of thousands of rows in its larger compile units, and where the compiler
writes no .debug_aranges (clang's default) resolve.py reads every unit's.  Every analysis rank
resolves its call sites, so that was seconds per rank, in the job too.  The kernel runs the
same state machine over the program's bytes (DWARF 2-5, section 6.2.5), with pyelftools'
arithmetic: the header (lengths, file names) is still read by pyelftools.

decode() returns None where the kernel cannot be used (no C compiler, MPIGRAPH_LINE_KERNEL=off,
a test setting) or where the program has what it leaves to pyelftools: DW_LNE_define_file (it
adds a file name), an opcode it does not know, or a program that ends inside an opcode.
"""

import ctypes

import numpy as np

from mpigraph.util import ckernel

SOURCE = r"""
#include <stdint.h>

/* A LEB128 number at p[*at] (signed: sign-extended from its last byte's bit 6); *bad where the
 * program ends inside it. */
static uint64_t leb(const uint8_t *p, int64_t n, int64_t *at, int *bad, int is_signed)
{
    uint64_t value = 0;
    int shift = 0;
    while (*at < n) {
        uint8_t byte = p[(*at)++];
        if (shift < 64)
            value |= (uint64_t)(byte & 0x7f) << shift;
        shift += 7;
        if (!(byte & 0x80)) {
            if (is_signed && shift < 64 && (byte & 0x40))
                value |= ~(uint64_t)0 << shift;
            return value;
        }
    }
    *bad = 1;
    return 0;
}

#define uleb(p, n, at, bad) leb(p, n, at, bad, 0)
#define sleb(p, n, at, bad) ((int64_t)leb(p, n, at, bad, 1))

static uint64_t fixed(const uint8_t *p, int64_t n, int64_t *at, int size, int little, int *bad)
{
    uint64_t value = 0;
    if (*at + size > n) {
        *bad = 1;
        return 0;
    }
    for (int i = 0; i < size; i++) {
        uint64_t byte = p[*at + (little ? i : size - 1 - i)];
        value |= byte << (8 * i);
    }
    *at += size;
    return value;
}

/* The rows of the line program p[0..n): a row per DW_LNS_copy, special opcode and
 * DW_LNE_end_sequence (line 0 and end 1 there), as pyelftools' states with their address, file
 * and line.  Returns the number of rows (at most n: each takes a byte at least), -1 for an
 * opcode left to pyelftools or a program cut inside one. */
int64_t line_rows(const uint8_t *p, int64_t n, int64_t min_inst, int64_t max_ops, int64_t line_base,
                  int64_t line_range, int64_t opcode_base, int64_t addr_size, int64_t little,
                  int64_t *out_addr, int64_t *out_file, int64_t *out_line, uint8_t *out_end)
{
    uint64_t address = 0, op_index = 0, file = 1;
    int64_t line = 1, at = 0, rows = 0;
    int bad = 0;
    if (line_range <= 0 || max_ops <= 0)
        return -1;
    while (at < n && !bad) {
        uint8_t op = p[at++];
        int emit = 0, end = 0;
        if (op >= opcode_base) {                       /* special opcode */
            int64_t adjusted = op - opcode_base, advance = adjusted / line_range;
            address += (uint64_t)(min_inst * (((int64_t)op_index + advance) / max_ops));
            op_index = ((int64_t)op_index + advance) % max_ops;
            line += line_base + adjusted % line_range;
            emit = 1;
        } else if (op == 0) {                          /* extended opcode */
            uint64_t length = uleb(p, n, &at, &bad);
            if (bad || at >= n)
                return -1;
            int64_t next = at + (int64_t)length;
            uint8_t ex = p[at++];
            if (ex == 1) {                             /* DW_LNE_end_sequence */
                emit = end = 1;
            } else if (ex == 2) {                      /* DW_LNE_set_address */
                address = fixed(p, n, &at, (int)addr_size, (int)little, &bad);
            } else if (ex == 3) {                      /* DW_LNE_define_file: pyelftools' */
                return -1;
            } else if (ex == 4) {                      /* DW_LNE_set_discriminator */
                uleb(p, n, &at, &bad);
            } else {                                   /* unknown: skipped by its length */
                at = next;
            }
        } else if (op == 1) {                          /* DW_LNS_copy */
            emit = 1;
        } else if (op == 2) {                          /* DW_LNS_advance_pc */
            address += uleb(p, n, &at, &bad) * (uint64_t)min_inst;
        } else if (op == 3) {                          /* DW_LNS_advance_line */
            line += sleb(p, n, &at, &bad);
        } else if (op == 4) {                          /* DW_LNS_set_file */
            file = uleb(p, n, &at, &bad);
        } else if (op == 5 || op == 12) {              /* DW_LNS_set_column, DW_LNS_set_isa */
            uleb(p, n, &at, &bad);
        } else if (op == 6 || op == 7 || op == 10 || op == 11) {
            ;                                          /* stmt, basic block, prologue, epilogue */
        } else if (op == 8) {                          /* DW_LNS_const_add_pc */
            address += (uint64_t)(((255 - opcode_base) / line_range) * min_inst);
        } else if (op == 9) {                          /* DW_LNS_fixed_advance_pc */
            address += fixed(p, n, &at, 2, (int)little, &bad);
        } else {                                       /* a standard opcode pyelftools refuses */
            return -1;
        }
        if (bad)
            return -1;
        if (emit) {
            out_addr[rows] = (int64_t)address;
            out_file[rows] = (int64_t)file;
            out_line[rows] = end ? 0 : line;
            out_end[rows] = (uint8_t)end;
            rows++;
        }
        if (end) {
            address = 0;
            op_index = 0;
            file = 1;
            line = 1;
        }
    }
    return bad ? -1 : rows;
}
"""

CDEF = """
int64_t line_rows(const uint8_t *p, int64_t n, int64_t min_inst, int64_t max_ops, int64_t line_base,
                  int64_t line_range, int64_t opcode_base, int64_t addr_size, int64_t little,
                  int64_t *out_addr, int64_t *out_file, int64_t *out_line, uint8_t *out_end);
"""

_KERNEL = ckernel.Kernel("line-kernel", SOURCE, CDEF, "MPIGRAPH_LINE_KERNEL", "off")
_I64, _PTR = ctypes.c_int64, ctypes.c_void_p
_FUNCTIONS = {"line_rows": (_I64, [_PTR, _I64, _I64, _I64, _I64, _I64, _I64, _I64, _I64, _PTR, _PTR, _PTR, _PTR])}


def decode(program):
    """(addresses, files, lines, ends) of a pyelftools LineProgram's rows, int64 and bool arrays;
    None where the kernel cannot decode it."""
    lib = _KERNEL.load_ctypes(_FUNCTIONS)
    if lib is None:
        return None
    header = program.header
    try:
        max_ops = header["maximum_operations_per_instruction"]    # DWARF 4 on
    except (KeyError, AttributeError):
        max_ops = 1
    # The program's own bytes, read from .debug_line's stream at its offsets (as pyelftools reads
    # them), not the whole section for each unit.
    program.stream.seek(program.program_start_offset)
    code = np.frombuffer(program.stream.read(program.program_end_offset - program.program_start_offset), np.uint8)
    n = len(code)
    addr, file, line = (np.empty(n, np.int64) for _ in range(3))
    end = np.empty(n, np.uint8)
    rows = lib.line_rows(code.ctypes.data, n, header["minimum_instruction_length"], max_ops, header["line_base"],
                         header["line_range"], header["opcode_base"], program.structs.address_size,
                         int(program.structs.little_endian), addr.ctypes.data, file.ctypes.data, line.ctypes.data,
                         end.ctypes.data)
    if rows < 0:
        return None
    return addr[:rows], file[:rows], line[:rows], end[:rows].astype(bool)
