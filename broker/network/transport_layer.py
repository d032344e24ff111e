"""Transport layers of a connection (Kafka's PlaintextTransportLayer and SslTransportLayer).

The channel reads and writes through one of these. Plaintext writes several buffers with one
``sendmsg`` and file slices with ``os.sendfile``; TLS encrypts in user space, so buffers are
joined into one write and file slices are copied in chunks (Kafka cannot use sendfile on TLS
either). Both raise ``BlockingIOError`` when the socket cannot make progress now.
"""

from __future__ import annotations

import os
import socket
import ssl
from collections.abc import Sequence
from typing import Any

TLS_WRITE_CHUNK = 256 * 1024  # bytes encrypted per write: a few TLS records, bounded memory


class PlaintextTransportLayer:
    zero_copy = True

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock

    def handshake(self) -> str | None:
        """None when the connection is ready for Kafka frames ("read"/"write": what it waits for)."""
        return None

    def recv_into(self, buffer: Any, nbytes: int = 0) -> int:
        return self.sock.recv_into(buffer, nbytes)

    def pending(self) -> int:
        """Bytes already received and decrypted but not yet read (TLS only)."""
        return 0

    def send_buffers(self, buffers: Sequence[Any]) -> int:
        return self.sock.sendmsg(buffers)

    def send_file(self, fileno: int, offset: int, count: int) -> int:
        return os.sendfile(self.sock.fileno(), fileno, offset, count)

    def peer_certificate(self) -> bytes | None:
        return None


class SslTransportLayer(PlaintextTransportLayer):
    zero_copy = False

    def __init__(self, sock: ssl.SSLSocket) -> None:
        super().__init__(sock)
        self.ssl_sock = sock

    def handshake(self) -> str | None:
        """Advance the TLS handshake; raises ssl.SSLError (or OSError) when it fails."""
        try:
            self.ssl_sock.do_handshake()
        except ssl.SSLWantReadError:
            return "read"
        except ssl.SSLWantWriteError:
            return "write"
        return None

    def recv_into(self, buffer: Any, nbytes: int = 0) -> int:
        """Fill ``buffer`` with as many TLS records as have arrived: one SSL_read returns one record
        (16 KiB at most), and a read per record would cost an event-loop turn per 16 KiB."""
        view = memoryview(buffer)
        limit = nbytes or len(view)
        total = 0
        while total < limit:
            try:
                n = self.ssl_sock.recv_into(view[total:limit])
            except (ssl.SSLWantReadError, ssl.SSLWantWriteError):
                if total:
                    break
                raise BlockingIOError from None
            except ssl.SSLZeroReturnError:
                break
            if n == 0:
                break
            total += n
        return total

    def pending(self) -> int:
        return self.ssl_sock.pending()

    def send_buffers(self, buffers: Sequence[Any]) -> int:
        # A write OpenSSL could not finish is retried with the same bytes from the same start
        # (and possibly more), as SSL_write requires: unsent parts are only ever appended to.
        if len(buffers[0]) >= TLS_WRITE_CHUNK or len(buffers) == 1:
            data: Any = buffers[0]
        else:
            joined = bytearray()
            for part in buffers:
                joined += part
                if len(joined) >= TLS_WRITE_CHUNK:
                    break
            data = joined
        try:
            return self.ssl_sock.send(data)
        except (ssl.SSLWantWriteError, ssl.SSLWantReadError):
            raise BlockingIOError from None

    def send_file(self, fileno: int, offset: int, count: int) -> int:
        chunk = os.pread(fileno, min(count, TLS_WRITE_CHUNK), offset)
        if not chunk:
            return 0
        return self.send_buffers([chunk])

    def peer_certificate(self) -> bytes | None:
        return self.ssl_sock.getpeercert(binary_form=True)
