"""Files as the store keeps them: streamed through SHA-256 (of the original bytes, checked again on restore) and
through zstd where it pays. Weights and optimizer states in bf16/fp32 barely compress; tokenizer files, JSON and
integer states do, so each file is judged on a sample instead of compressing everything or nothing."""

from __future__ import annotations

import hashlib
import io
from dataclasses import dataclass
from typing import BinaryIO

IDENTITY, ZSTD = "identity", "zstd"
SAMPLE_BYTES = 1 << 20
# Compressed only when a sample shrinks to at most this fraction: below ~10% the CPU time costs more than the
# bytes it saves on a link that moves hundreds of MB/s.
PAYS_RATIO = 0.9
CHUNK = 8 << 20


class CodecError(RuntimeError):
    """A file that cannot be encoded or decoded as its manifest says."""


def zstd_available() -> bool:
    try:
        import zstandard  # noqa: F401
    except ImportError:
        return False
    return True


@dataclass(frozen=True)
class Compression:
    """`zstd` at `level` where a sample shows it pays; `off`: every file as it is."""

    enabled: bool = True
    level: int = 3

    def encoding_for(self, path: str) -> str:
        if not self.enabled or not zstd_available():
            return IDENTITY
        import zstandard

        with open(path, "rb") as f:
            sample = f.read(SAMPLE_BYTES)
        if len(sample) < 512:
            return IDENTITY  # headers would eat the gain
        compressed = zstandard.ZstdCompressor(level=self.level).compress(sample)
        return ZSTD if len(compressed) <= PAYS_RATIO * len(sample) else IDENTITY


class HashingReader(io.RawIOBase):
    """Reads `source` and hashes what passes, counting bytes (the original's SHA-256 and size)."""

    def __init__(self, source: BinaryIO) -> None:
        self.source = source
        self.sha256 = hashlib.sha256()
        self.size = 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: memoryview) -> int:  # type: ignore[override]
        data = self.source.read(len(buffer))
        n = len(data)
        buffer[:n] = data
        self.sha256.update(data)
        self.size += n
        return n


def encoded_reader(source: BinaryIO, encoding: str, level: int) -> tuple[HashingReader, BinaryIO]:
    """(the hashing reader of the original, what to upload): the same stream, or zstd's compressing reader over it."""
    hashing = HashingReader(source)
    if encoding == IDENTITY:
        return hashing, io.BufferedReader(hashing, CHUNK)
    import zstandard

    return hashing, zstandard.ZstdCompressor(level=level).stream_reader(io.BufferedReader(hashing, CHUNK))


def decode_file(stored: str, target: str, encoding: str) -> tuple[str, int]:
    """Write `stored` decoded into `target`; returns the SHA-256 and size of what was written."""
    sha256, size = hashlib.sha256(), 0
    with open(stored, "rb") as src, open(target, "wb") as dst:
        if encoding == ZSTD:
            try:
                import zstandard
            except ImportError:
                raise CodecError(f"{stored} is zstd-compressed and this Python has no zstandard: pip install "
                                 "zstandard") from None
            reader: BinaryIO = zstandard.ZstdDecompressor().stream_reader(src)  # type: ignore[assignment]
        elif encoding == IDENTITY:
            reader = src
        else:
            raise CodecError(f"{stored}: unknown encoding {encoding!r} (written by a newer slurm-eks?)")
        while chunk := reader.read(CHUNK):
            sha256.update(chunk)
            size += len(chunk)
            dst.write(chunk)
    return sha256.hexdigest(), size
