"""The file operations the embedded engine's durable writes are made of: a write that writes all of its bytes, a cut
made durable, a directory's entries made durable."""

from __future__ import annotations

import os
from pathlib import Path


def pwrite_all(fd: int, data: bytes | bytearray | memoryview, offset: int) -> None:
    """Write all of `data` at `offset` (pwrite may write fewer bytes than asked: the rest goes after)."""
    view, written = memoryview(data), 0
    while written < len(view):
        written += os.pwrite(fd, view[written:], offset + written)


def cut(fd: int, length: int) -> None:
    """Cut the file at `length` and fsync it, its size included."""
    os.ftruncate(fd, length)
    os.fsync(fd)


def raise_again(error: OSError) -> None:
    """Raise `error` (a write that failed, handed where an fsync would be: the commit log's `_sync`)."""
    raise error


def fsync_directory(path: Path) -> None:
    """Make the directory's entries durable (a file created, renamed or deleted in it)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
