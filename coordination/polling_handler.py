"""A kazoo handler whose ``select`` is one poll(2) call.

kazoo's connection thread asks its handler to ``select`` before every read and write; the stock
threading handler builds an epoll selector for each call (epoll_create1, epoll_ctl, epoll_wait,
close), so each ZooKeeper request cost about 190 us of Python and system time, most of it there,
and a controller reading 5,000 partition states spent a second on it. A poll object costs no
system call to build and one to wait.
"""

from __future__ import annotations

import select
import socket
import ssl
from collections.abc import Sequence
from typing import Any

from kazoo.handlers.threading import SequentialThreadingHandler
from kazoo.handlers.utils import fileobj_to_fd

_READABLE = select.POLLIN | select.POLLPRI | select.POLLHUP | select.POLLERR
_WRITABLE = select.POLLOUT | select.POLLHUP | select.POLLERR


class PollingThreadingHandler(SequentialThreadingHandler):
    def __init__(self, ssl_context: ssl.SSLContext | None = None) -> None:
        super().__init__()
        self.ssl_context = ssl_context  # TLS to ZooKeeper (zookeeper.ssl.*), built once by the caller

    def create_connection(self, *args: Any, **kwargs: Any) -> Any:
        """kazoo's connection, over ``ssl_context`` when there is one (kazoo would build its own
        context from key files at every connection; this one is built once, in memory)."""
        if self.ssl_context is None:
            return super().create_connection(*args, **kwargs)
        address = kwargs["address"] if "address" in kwargs else args[0]
        family = socket.getaddrinfo(address[0], address[1], 0, socket.SOCK_STREAM)[0][0]
        conn = self.ssl_context.wrap_socket(socket.socket(family), server_hostname=kwargs.get("hostname") or address[0])
        try:
            conn.settimeout(kwargs.get("timeout"))
            conn.connect(address)
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        except BaseException:
            conn.close()
            raise
        return conn

    def select(self, rlist: Sequence[Any], wlist: Sequence[Any], xlist: Sequence[Any],
               timeout: float | None = None) -> tuple[list[Any], list[Any], list[Any]]:
        """kazoo's select contract: the ready objects of ``rlist`` and of ``wlist`` (an object
        ready for both counts as readable only), ``xlist`` ignored; a hang-up or error is ready."""
        if timeout is not None and timeout < 0:
            raise ValueError("timeout must be non-negative")
        poller = select.poll()
        objects: dict[int, list[Any]] = {}
        masks: dict[int, int] = {}
        for fileobjs, mask in ((rlist, select.POLLIN | select.POLLPRI), (wlist, select.POLLOUT)):
            for fileobj in fileobjs:
                try:
                    fd = fileobj_to_fd(fileobj)
                except TypeError as exc:
                    raise ValueError("Invalid event mask or fd") from exc
                masks[fd] = masks.get(fd, 0) | mask
                objects.setdefault(fd, []).append(fileobj)
        for fd, mask in masks.items():
            poller.register(fd, mask)
        readable: list[Any] = []
        writable: list[Any] = []
        for fd, events in poller.poll(None if timeout is None else timeout * 1000):
            if events & select.POLLNVAL:
                raise ValueError("Invalid event mask or fd")
            if events & _READABLE and masks[fd] & select.POLLIN:
                readable.extend(objects[fd])
            elif events & _WRITABLE and masks[fd] & select.POLLOUT:
                writable.extend(objects[fd])
        return readable, writable, []
