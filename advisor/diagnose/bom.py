"""Text logs written in another encoding than UTF-8, named by a byte-order mark: read as UTF-8, in one place."""

from __future__ import annotations

import codecs
import io

# A byte-order mark names the encoding of a text log: UTF-16 (PowerShell's `>` and `Out-File`, Notepad's "Unicode")
# or UTF-8 with a BOM (Notepad, PowerShell 7's utf8BOM). Every reader in this package reads UTF-8, so such a file is
# transcoded once where it is opened (text_stream for a stream, text_bytes for a whole file), never sniffed as binary.
BOMS = ((b"\xef\xbb\xbf", "utf-8"), (b"\xff\xfe", "utf-16-le"), (b"\xfe\xff", "utf-16-be"))


def bom_encoding(head: bytes) -> tuple[bytes, str] | None:
    """(the byte-order mark, the encoding it names) a file starts with, or None (UTF-8, as every log is read)."""
    for mark, encoding in BOMS:
        if head.startswith(mark):
            return mark, encoding
    return None


class TranscodedLines(io.RawIOBase):
    """A text file in another encoding (named by its byte-order mark) read as UTF-8 without the mark. Streamed: a
    long file is not held whole."""

    def __init__(self, stream: io.BufferedIOBase, encoding: str, mark: int) -> None:
        self._stream = stream
        self._decoder = codecs.getincrementaldecoder(encoding)(errors="replace")
        self._pending = b""
        stream.read(mark)

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        while not self._pending:
            data = self._stream.read(max(2, len(buffer)))
            self._pending = self._decoder.decode(data, final=not data).encode("utf-8")
            if not data:
                break
        size = min(len(buffer), len(self._pending))
        buffer[:size], self._pending = self._pending[:size], self._pending[size:]
        return size


def text_stream(stream: io.BufferedIOBase) -> io.BufferedIOBase:
    """``stream``, read as UTF-8 without a byte-order mark when its head starts with one."""
    if not hasattr(stream, "peek"):
        return stream
    found = bom_encoding(stream.peek(4)[:4])
    if found is None:
        return stream
    mark, encoding = found
    return io.BufferedReader(TranscodedLines(stream, encoding, len(mark)))


def text_bytes(data: bytes) -> bytes:
    """A whole file's bytes as UTF-8 without a byte-order mark (see text_stream)."""
    found = bom_encoding(data[:4])
    if found is None:
        return data
    mark, encoding = found
    return data[len(mark):].decode(encoding, errors="replace").encode("utf-8")
