"""gzip for ``ecpa serve``'s large answers (docs/serve.md "Compression"): a fleet's
``/metrics``, status page and listing run to megabytes (about 700 bytes a slot in
``/metrics``, 1.6 kB on the page), which 16 clients then pull through one interpreter. A
client that accepts gzip (Prometheus does, browsers do) gets the snapshot's bytes
compressed once per snapshot, not once per request.

``/metrics`` ends with two lines of the moment (the snapshot's age, whether it is stale),
so its body is compressed once up to a sync point and each scrape finishes a copy of that
compressor with its own tail: one gzip member, the same bytes a client would decompress
from compressing the whole answer at once.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass

__all__ = ["GzipPrefix", "accepts_gzip", "gzip_bytes"]

#: zlib's window bits for a gzip header and trailer.
_GZIP = 16 + zlib.MAX_WBITS
#: Fast, and most of the size: these answers repeat themselves line after line.
_LEVEL = 5


def accepts_gzip(header: str | None) -> bool:
    """Whether an ``Accept-Encoding`` header accepts ``gzip`` (named, with no ``q`` of 0;
    anything unparsable: no)."""
    if not header:
        return False
    for item in header.split(","):
        name, _, params = item.partition(";")
        if name.strip().lower() != "gzip":
            continue
        q = 1.0
        for param in params.split(";"):
            key, _, value = param.partition("=")
            if key.strip().lower() == "q":
                try:
                    q = float(value.strip())
                except ValueError:
                    return False
        return 0.0 < q <= 1.0
    return False


def gzip_bytes(body: bytes) -> bytes:
    """``body`` as one gzip member."""
    compressor = zlib.compressobj(_LEVEL, zlib.DEFLATED, _GZIP)
    return compressor.compress(body) + compressor.flush()


@dataclass(frozen=True)
class GzipPrefix:
    """A body compressed once up to a sync point, finished per answer with its own tail."""

    head: bytes
    _state: zlib._Compress

    @classmethod
    def of(cls, body: bytes) -> GzipPrefix:
        compressor = zlib.compressobj(_LEVEL, zlib.DEFLATED, _GZIP)
        head = compressor.compress(body) + compressor.flush(zlib.Z_SYNC_FLUSH)
        return cls(head, compressor)

    def finish(self, tail: bytes) -> bytes:
        """The whole answer, ``body + tail``, as one gzip member (the shared state is
        copied, never advanced)."""
        compressor = self._state.copy()
        return self.head + compressor.compress(tail) + compressor.flush()
