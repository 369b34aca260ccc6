"""Dump files: JSON lines, gzip when the name ends in ``.gz`` (writing) or the bytes say so
(reading); ``-`` is standard output or input."""

from __future__ import annotations

import gzip
import io
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import IO, cast

from .dump_format import DumpEntry, DumpFormatError, LineDecoder, encode_entry

_GZIP_MAGIC = b"\x1f\x8b"
_CHUNK_BYTES = 1 << 20


def write_dump(entries: Iterable[DumpEntry], destination: str | Path | IO[bytes], *, compress: bool | None = None) -> int:
    """Write ``entries`` as dump lines; returns the number of lines. ``compress``: gzip (default:
    when the file name ends in ``.gz``; never for an already open stream unless asked)."""
    if isinstance(destination, (str, Path)) and str(destination) != "-":
        path = Path(destination)
        gz = path.suffix == ".gz" if compress is None else compress
        tmp = path.with_name(path.name + ".partial")
        try:
            with open(tmp, "wb") as raw:
                lines = _write(entries, raw, gz)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
        tmp.replace(path)  # a reader never sees a half-written dump under the final name
        return lines
    stream = sys.stdout.buffer if isinstance(destination, (str, Path)) else destination
    return _write(entries, stream, bool(compress))


def _write(entries: Iterable[DumpEntry], raw: IO[bytes], gz: bool) -> int:
    out = cast(IO[bytes], gzip.GzipFile(fileobj=raw, mode="wb", compresslevel=6)) if gz else raw
    lines = 0
    chunk: list[bytes] = []
    size = 0
    try:
        for entry in entries:
            data = (encode_entry(entry) + "\n").encode("utf-8")
            chunk.append(data)
            size += len(data)
            lines += 1
            if size >= _CHUNK_BYTES:
                out.write(b"".join(chunk))
                chunk, size = [], 0
        out.write(b"".join(chunk))
    finally:
        if gz:
            out.close()
    raw.flush()
    return lines


def read_dump(source: str | Path | IO[bytes]) -> Iterator[DumpEntry]:
    """The entries of a dump, decoded and checked line by line (``DumpFormatError`` names the
    first bad line). Reads at constant memory."""
    if isinstance(source, (str, Path)) and str(source) != "-":
        with open(source, "rb") as raw:
            yield from _read(raw)
    else:
        yield from _read(sys.stdin.buffer if isinstance(source, (str, Path)) else source)


def _read(raw: IO[bytes]) -> Iterator[DumpEntry]:
    buffered = raw if isinstance(raw, io.BufferedReader) else io.BufferedReader(_Readable(raw))
    gz = buffered.peek(2)[:2] == _GZIP_MAGIC
    stream = cast(IO[bytes], gzip.GzipFile(fileobj=buffered, mode="rb")) if gz else cast(IO[bytes], buffered)
    decoder = LineDecoder()
    number = 0
    try:
        for number, data in enumerate(stream, start=1):
            try:
                line = data.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise DumpFormatError(number, f"not UTF-8 ({exc.reason} at byte {exc.start})") from None
            if not line.endswith("\n"):
                raise DumpFormatError(number, "the line is cut off (no newline at its end: truncated dump?)")
            yield decoder.decode(number, line)
    except (EOFError, OSError) as exc:  # gzip: a truncated or corrupt stream
        raise DumpFormatError(number + 1, f"unreadable compressed data ({exc})") from None


class _Readable(io.RawIOBase):
    """A readable raw view of any binary stream, so it can be peeked."""

    def __init__(self, stream: IO[bytes]) -> None:
        self._stream = stream

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: bytearray | memoryview) -> int:  # type: ignore[override]
        data = self._stream.read(len(buffer))
        buffer[: len(data)] = data
        return len(data)
