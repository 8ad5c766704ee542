"""The judge's own reader of the functions an ELF64 shared object defines (the backend
evidence of evidence.py): the file is one the judge opened itself from the build slot, so its
bytes are the candidate's to shape, and every offset and size is checked against the file's own
size and the bytes really read, every table capped. A library would parse more and trust more.
"""

from __future__ import annotations

import os
import re
import struct

MAX_TABLE_BYTES = 64 << 20  # a symbol or string table larger than this is not read
MAX_SYMBOLS = 1 << 20  # names kept from one extension's symbol tables, at most


def pread(fd: int, offset: int, length: int) -> bytes:
    out = bytearray()
    while len(out) < length:
        chunk = os.pread(fd, min(length - len(out), 1 << 24), offset + len(out))
        if not chunk:
            break
        out += chunk
    return bytes(out)


_SHT_SYMTAB, _SHT_STRTAB, _SHT_DYNSYM = 2, 3, 11
_STT_FUNC, _STT_GNU_IFUNC = 2, 10
_ET_DYN = 3
_SECTION = struct.Struct("<IIQQQQIIQQ")  # Elf64_Shdr
_SYMBOL = struct.Struct("<IBBHQQ")  # Elf64_Sym
_MAX_SECTIONS = 1 << 16


class Budget:
    """What one evidence check may still read of the candidate's files, in bytes."""

    def __init__(self, total: int):
        self.left = total


def elf_functions(fd: int, size: int, budget: Budget) -> set[str] | str:
    """The functions an ELF64 little-endian shared object defines in its symbol tables (the
    dynamic one, .dynsym, and the full one, .symtab, where the build kept it): the names of its
    defined FUNC (and IFUNC) symbols. Read with pread from `fd` (the file the judge opened),
    each offset and size checked against the file's size (`size`, its fstat) and the bytes
    really read, every table capped. Returns why not where the file is not such an object."""

    def read(offset: int, length: int) -> bytes | None:
        if offset < 0 or length < 0 or offset + length > size or length > budget.left:
            return None
        data = pread(fd, offset, length)
        budget.left -= len(data)
        return data if len(data) == length else None

    head = read(0, 64)
    if head is None or head[:4] != b"\x7fELF" or head[4] != 2 or head[5] != 1:
        return "not an ELF64 shared object"
    e_type, = struct.unpack_from("<H", head, 16)
    e_shoff, = struct.unpack_from("<Q", head, 40)
    e_shentsize, e_shnum = struct.unpack_from("<HH", head, 58)
    if e_type != _ET_DYN:
        return "not an ELF64 shared object"
    if e_shentsize < _SECTION.size or e_shoff == 0:
        return "no section headers"
    if e_shnum == 0:  # more sections than fit: the count is the first header's sh_size
        first = read(e_shoff, _SECTION.size)
        if first is None:
            return "its section headers lie outside the file"
        e_shnum = _SECTION.unpack(first)[5]
    if not 0 < e_shnum <= _MAX_SECTIONS:
        return "no section headers"
    table = read(e_shoff, e_shnum * e_shentsize)
    if table is None:
        return "its section headers lie outside the file"
    sections = [_SECTION.unpack_from(table, i * e_shentsize) for i in range(e_shnum)]
    names: set[str] = set()
    tables = 0
    for section in sections:
        if section[1] not in (_SHT_DYNSYM, _SHT_SYMTAB):
            continue
        offset, length, link, entsize = section[4], section[5], section[6], section[9]
        if entsize != _SYMBOL.size or link >= e_shnum or sections[link][1] != _SHT_STRTAB \
                or length > MAX_TABLE_BYTES or sections[link][5] > MAX_TABLE_BYTES:
            continue
        symbols = read(offset, length - length % _SYMBOL.size)
        strings = read(sections[link][4], sections[link][5])
        if symbols is None or strings is None:
            continue
        tables += 1
        for at in range(0, len(symbols), _SYMBOL.size):
            st_name, st_info, _, st_shndx, _, _ = _SYMBOL.unpack_from(symbols, at)
            if st_info & 0xF not in (_STT_FUNC, _STT_GNU_IFUNC) or st_shndx == 0:
                continue  # not a function, or one it uses and does not define
            end = strings.find(b"\0", st_name, st_name + 4096)
            if st_name >= len(strings) or end <= st_name:
                continue
            names.add(strings[st_name:end].decode("utf-8", "replace"))
            if len(names) >= MAX_SYMBOLS:
                return names
    return names if tables else "no symbol table"


_SOURCE_NAME = re.compile(r"(?<![0-9])([1-9][0-9]{0,3})")
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def identifiers(symbols: set[str]) -> set[str]:
    """Each symbol, and the identifiers of a C++ (Itanium ABI) one: the <length><name> parts
    of `_Z12relu_forwardN2at6TensorE` (relu_forward, at, Tensor)."""
    out = set(symbols)
    for symbol in symbols:
        if not symbol.startswith("_Z"):
            continue
        for m in _SOURCE_NAME.finditer(symbol):
            name = symbol[m.end():m.end() + int(m.group(1))]
            if len(name) == int(m.group(1)) and _IDENTIFIER.fullmatch(name):
                out.add(name)
    return out
