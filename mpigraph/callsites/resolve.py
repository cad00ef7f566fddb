"""Addresses in an ELF object to function, source file and line.

pyelftools reads the object's symbols (.symtab, else .dynsym) and DWARF line tables, as
addr2line does.  A program built without -g has no line table: the function alone.  The
address looked up is the return address minus one: the call instruction itself, so a call
that ends its function or its line is not taken for the next one.
"""

import contextlib
import functools
import os

import numpy as np

from mpigraph.callsites import line_kernel

try:
    from elftools.elf.elffile import ELFFile
except ImportError:     # a declared dependency; an environment without it names no call site
    ELFFile = None


class ObjectIndex:
    """One ELF object's load segments and function symbols, sorted by address, and the line rows
    of its compile units as they are asked for."""

    def __init__(self, path: str):
        self.path = path
        self.segments = np.zeros((0, 3), np.int64)     # p_offset, p_filesz, p_vaddr
        self.sym_lo = np.zeros(0, np.int64)       # function symbols by (address, size)
        self.sym_size = np.zeros(0, np.int64)
        self.sym_hi = np.zeros(0, np.int64)
        self._sym_name = np.zeros(0, np.int64)    # each one's name: an offset into _strings
        self._strings = b""
        self._units = {}        # compile-unit offset (None: every unit) -> its line rows
        self._ranges = None     # (has DWARF, its .debug_aranges or None), read at the first line asked
        if ELFFile is None:
            return
        try:
            with open(path, "rb") as f:
                elf = ELFFile(f)
                self._read_segments(elf)
                self._read_symbols(elf)
        except Exception:   # unreadable, not ELF, or DWARF pyelftools cannot parse: names nothing, and
            pass            # the run's other call sites are still named

    def _read_segments(self, elf):
        rows = [(s["p_offset"], s["p_filesz"], s["p_vaddr"]) for s in elf.iter_segments() if s["p_type"] == "PT_LOAD"]
        self.segments = np.array(rows, np.int64).reshape(-1, 3)

    def _read_symbols(self, elf):
        """The function symbols, read as one array of the table's fixed-size entries: a C++
        program has tens of thousands (libarrow 74,107: 2.2 s through pyelftools' symbol
        objects, on every analysis rank), of which a run's call sites name a few.  Their names
        are read from the string table only for the addresses looked up (``function``)."""
        table = elf.get_section_by_name(".symtab") or elf.get_section_by_name(".dynsym")
        if table is None:
            return
        dtype = _symbol_dtype(elf.elfclass, elf.little_endian)
        data = table.data()
        entries = np.frombuffer(data, dtype, len(data) // dtype.itemsize)
        kind = entries["info"] & 0xF
        entries = entries[np.isin(kind, _FUNCTION_TYPES) & (entries["value"] != 0)]
        value, size = entries["value"].astype(np.int64), entries["size"].astype(np.int64)
        order = np.lexsort((size, value))
        self.sym_lo, self.sym_size = value[order], size[order]
        self.sym_hi = self.sym_lo + np.maximum(self.sym_size, 1)
        self._sym_name = entries["name"][order].astype(np.int64)
        self._strings = elf.get_section(table["sh_link"]).data()

    def _unit_rows(self, vaddr):
        """(addresses, lines, files) of the line rows of the compile unit holding vaddr, read at
        the first ask: .debug_aranges names the unit, so a big program's DWARF is not parsed
        whole for a few call sites; where it names none (no aranges: clang's default), every
        unit's rows, read once."""
        if self._ranges is None:
            # Read once: opening the object and reading its DWARF sections for every call site
            # took 1-2 ms a site on every analysis rank, most sites sharing a unit already read.
            dwarf = self._dwarf_info()
            self._ranges = (dwarf is not None, dwarf.get_aranges() if dwarf is not None else None)
        has_dwarf, aranges = self._ranges
        if not has_dwarf:
            return _NO_ROWS
        offset = aranges.cu_offset_at_addr(vaddr) if aranges is not None else None
        if offset not in self._units:
            dwarf = self._dwarf_info()
            units = [dwarf.get_CU_at(offset)] if offset is not None else dwarf.iter_CUs()
            self._units[offset] = _line_rows(dwarf, units)
        return self._units[offset]

    def _dwarf_info(self):
        """The object's DWARF (pyelftools' DWARFInfo: its sections read into memory), None
        without: read once for every lookup inside a ``batch`` block, else at each call."""
        if _batch is not None and self.path in _batch:
            return _batch[self.path]
        with open(self.path, "rb") as f:
            elf = ELFFile(f)
            # Only an object file's DWARF has relocations to apply; a program's or a library's is
            # linked, and looking for them scans every section header again per DWARF section
            # (12 ms of a small program's 15).
            dwarf = (elf.get_dwarf_info(relocate_dwarf_sections=elf["e_type"] == "ET_REL")
                     if elf.has_dwarf_info() else None)
        if _batch is not None:
            _batch[self.path] = dwarf
        return dwarf

    def vaddr(self, file_offset: int):
        """The object's virtual address of a file offset (its PT_LOAD segment's), or None."""
        for p_offset, p_filesz, p_vaddr in self.segments:
            if p_offset <= file_offset < p_offset + max(p_filesz, 1):
                return int(file_offset - p_offset + p_vaddr)
        return None

    def function(self, vaddr: int) -> str:
        """The function symbol holding vaddr ("" where none does): the last one starting at or
        before it, the longest of those at one address, and of aliases (same address and size)
        the last name in sort order."""
        i = int(np.searchsorted(self.sym_lo, vaddr, side="right")) - 1
        if i < 0 or vaddr >= self.sym_hi[i]:
            return ""
        first = i
        while first > 0 and self.sym_lo[first - 1] == self.sym_lo[i] and self.sym_size[first - 1] == self.sym_size[i]:
            first -= 1
        return max(self._name(j) for j in range(first, i + 1))

    def _name(self, j):
        at = int(self._sym_name[j])
        end = self._strings.find(b"\0", at)
        return self._strings[at:end if end >= 0 else len(self._strings)].decode("utf-8", errors="replace")

    def line(self, vaddr: int):
        """(file, line) of the line row covering vaddr; ("", 0) where there is none."""
        if ELFFile is None:
            return "", 0
        try:
            addr, line, names = self._unit_rows(vaddr)
        except Exception:   # DWARF pyelftools cannot parse: the function names the site
            return "", 0
        i = int(np.searchsorted(addr, vaddr, side="right")) - 1
        if i < 0 or line[i] == 0:
            return "", 0
        return names[i], int(line[i])


_NO_ROWS = (np.zeros(0, np.int64), np.zeros(0, np.int64), [])

_FUNCTION_TYPES = (2, 10)       # STT_FUNC, STT_GNU_IFUNC: st_info's low four bits


def _symbol_dtype(elfclass, little_endian):
    """An Elf32_Sym or Elf64_Sym entry as a numpy dtype (gABI: the two order their fields apart)."""
    e = "<" if little_endian else ">"
    if elfclass == 64:
        return np.dtype([("name", e + "u4"), ("info", "u1"), ("other", "u1"), ("shndx", e + "u2"),
                         ("value", e + "u8"), ("size", e + "u8")])
    return np.dtype([("name", e + "u4"), ("value", e + "u4"), ("size", e + "u4"), ("info", "u1"),
                     ("other", "u1"), ("shndx", e + "u2")])


def _line_rows(dwarf, units):
    """(addresses, lines, files) of the line programs of `units`, sorted by address; line 0
    marks an end of sequence (no line until the next row)."""
    parts = []         # per unit: (addresses, files, lines, ends, its file names, its first file's number)
    for cu in units:
        program = dwarf.line_program_for_CU(cu)
        if program is None:
            continue
        rows = line_kernel.decode(program) or _decoded_by_pyelftools(program)
        base = 0 if program.header["version"] >= 5 else 1   # DWARF 5 numbers files from 0
        parts.append(rows + (_file_names(program), base))
    if not parts:
        return _NO_ROWS
    addr, line, end = (np.concatenate([p[i] for p in parts]) for i in (0, 2, 3))
    name = np.concatenate([_names_of(files, names, base) for _, files, _, _, names, base in parts])
    # At one address an end of sequence comes before the row that starts the next one.
    order = np.lexsort((~end, addr))
    return addr[order], line[order], name[order].tolist()


def _decoded_by_pyelftools(program):
    """line_kernel.decode's arrays from pyelftools' decoding (where the kernel does not run)."""
    rows = [(e.state.address, e.state.file, 0 if e.state.end_sequence else e.state.line, e.state.end_sequence)
            for e in program.get_entries() if e.state is not None]
    addr, file, line, end = zip(*rows) if rows else ((), (), (), ())
    return (np.array(addr, np.int64), np.array(file, np.int64), np.array(line, np.int64), np.array(end, bool))


def _names_of(files, names, base):
    """Each row's file name from its file number (numbered from `base`); "" where out of range."""
    table = np.array(list(names) + [""], object)
    i = np.asarray(files, np.int64) - base
    return table[np.where((i >= 0) & (i < len(names)), i, len(names))]


def _file_names(program):
    dirs = [d.decode(errors="replace") if isinstance(d, bytes) else str(d)
            for d in program.header.get("include_directory", [])]
    out = []
    for entry in program.header.get("file_entry", []):
        n = entry.name.decode(errors="replace") if isinstance(entry.name, bytes) else str(entry.name)
        d = entry.dir_index
        version5 = program.header["version"] >= 5
        folder = dirs[d] if version5 and d < len(dirs) else (dirs[d - 1] if 0 < d <= len(dirs) else "")
        out.append(n if os.path.isabs(n) or not folder else os.path.join(folder, n))
    return out


_batch = None       # {object path: its DWARFInfo} while a ``batch`` block runs


@contextlib.contextmanager
def batch():
    """Within the block each object's DWARF is read once for all the lookups made in it (its
    sections held in memory until the block ends); outside, each compile unit read reads the
    object's DWARF sections and relocations again.  A C++ program's sites fall in several units:
    HPCG's 13 sites over 2 ranks read them 8 times, most of the resolution's time."""
    global _batch
    outer = _batch
    _batch = {} if outer is None else outer
    try:
        yield
    finally:
        _batch = outer


@functools.lru_cache(maxsize=64)
def object_index(path: str) -> ObjectIndex:
    return ObjectIndex(path)


def locate(path: str, file_offset: int):
    """(function, file, line) of the call whose return address is at file_offset in path."""
    index = object_index(path)
    vaddr = index.vaddr(int(file_offset))
    if vaddr is None:
        return "", "", 0
    vaddr -= 1
    file, line = index.line(vaddr)
    return index.function(vaddr), file, line
