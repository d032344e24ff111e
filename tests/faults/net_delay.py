"""Delay every packet of a network namespace, as `tc qdisc ... netem delay` would where netem is missing.

Run inside the namespace (``ip netns exec NS python -m tests.faults.net_delay --queue 7 --delay-ms 80``)
after an iptables rule sends packets to NFQUEUE queue 7 with ``--queue-bypass``. The kernel holds each
queued packet until this process gives a verdict; we give NF_ACCEPT ``delay`` after the packet arrived.

Why NFQUEUE and not the alternatives this kernel has: ``tbf``/``htb`` shape a rate, so their delay
depends on load and is zero for a lone packet; a delaying TCP relay only sees connections opened after
it is put in the path (and changes the peer's address). NFQUEUE delays packets of connections that
already exist, on both sides of every TCP conversation, which is what netem does. Unlike netem, the
delay is the same for every packet (no jitter, no reordering), packets are released in batches of
what became due within one millisecond, and when this process dies the bypass lets traffic through.
Only packet metadata is copied to us (NFQNL_COPY_META), so the cost per packet is one small netlink
message and a shared batch verdict.
"""
from __future__ import annotations

import argparse
import collections
import select
import signal
import socket
import struct
import sys
import time

NETLINK_NETFILTER = 12
NFNL_SUBSYS_QUEUE = 3
NFQNL_MSG_PACKET, NFQNL_MSG_CONFIG, NFQNL_MSG_VERDICT_BATCH = 0, 2, 3
NFQA_PACKET_HDR, NFQA_VERDICT_HDR = 1, 2
NFQA_CFG_CMD, NFQA_CFG_PARAMS, NFQA_CFG_QUEUE_MAXLEN, NFQA_CFG_MASK, NFQA_CFG_FLAGS = 1, 2, 3, 4, 5
NFQNL_CFG_CMD_BIND = 1
NFQNL_COPY_META = 1
NFQA_CFG_F_FAIL_OPEN = 1
NF_ACCEPT = 1
NLM_F_REQUEST, NLM_F_ACK = 1, 4
NLMSG_ERROR = 2
SO_RCVBUFFORCE = 33


def _attr(kind: int, payload: bytes) -> bytes:
    length = 4 + len(payload)
    return struct.pack("=HH", length, kind) + payload + b"\0" * (-length % 4)


def _message(msg_type: int, queue: int, attrs: bytes, flags: int = NLM_F_REQUEST) -> bytes:
    body = struct.pack("!BBH", socket.AF_UNSPEC, 0, queue) + attrs
    return struct.pack("=IHHII", 16 + len(body), (NFNL_SUBSYS_QUEUE << 8) | msg_type, flags, 0, 0) + body


def _check_ack(sock: socket.socket) -> None:
    data = sock.recv(65536)
    length, msg_type = struct.unpack_from("=IH", data)
    if msg_type == NLMSG_ERROR:
        (error,) = struct.unpack_from("=i", data, 16)
        if error:
            raise OSError(-error, f"nfqueue configuration refused: {error}")


def bind_queue(queue: int, max_len: int = 65536) -> socket.socket:
    """A netlink socket bound to ``queue``, copying metadata only, failing open when full."""
    sock = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, NETLINK_NETFILTER)
    sock.setsockopt(socket.SOL_SOCKET, SO_RCVBUFFORCE, 16 << 20)
    sock.bind((0, 0))
    config = [
        _attr(NFQA_CFG_CMD, struct.pack("!BBH", NFQNL_CFG_CMD_BIND, 0, socket.AF_INET)),
        _attr(NFQA_CFG_PARAMS, struct.pack("!IB", 0, NFQNL_COPY_META)),
        _attr(NFQA_CFG_QUEUE_MAXLEN, struct.pack("!I", max_len)),
        _attr(NFQA_CFG_MASK, struct.pack("!I", NFQA_CFG_F_FAIL_OPEN))
        + _attr(NFQA_CFG_FLAGS, struct.pack("!I", NFQA_CFG_F_FAIL_OPEN)),
    ]
    for attrs in config:
        sock.send(_message(NFQNL_MSG_CONFIG, queue, attrs, NLM_F_REQUEST | NLM_F_ACK))
        _check_ack(sock)
    return sock


def packet_ids(data: bytes) -> list[int]:
    """The packet ids of the NFQNL_MSG_PACKET messages in one netlink read."""
    ids, offset = [], 0
    while offset + 16 <= len(data):
        length, msg_type = struct.unpack_from("=IH", data, offset)
        if length < 16:
            break
        if msg_type == (NFNL_SUBSYS_QUEUE << 8) | NFQNL_MSG_PACKET:
            attr = offset + 20  # nlmsghdr + nfgenmsg
            while attr + 4 <= offset + length:
                attr_len, attr_type = struct.unpack_from("=HH", data, attr)
                if attr_len < 4:
                    break
                if attr_type & 0x7FFF == NFQA_PACKET_HDR:
                    ids.append(struct.unpack_from("!I", data, attr + 4)[0])
                    break
                attr += (attr_len + 3) & ~3
        offset += (length + 3) & ~3
    return ids


def run(queue: int, delay_ms: float) -> None:
    sock = bind_queue(queue)
    delay = delay_ms / 1000
    pending: collections.deque[tuple[float, int]] = collections.deque()  # (due, packet id), ids ascending
    stop = False

    def on_term(*_: object) -> None:
        nonlocal stop
        stop = True

    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGINT, on_term)
    print(f"net_delay: queue {queue}, {delay_ms} ms", flush=True)
    while not stop:
        timeout = max(0.0, pending[0][0] - time.monotonic()) if pending else 0.5
        readable, _, _ = select.select([sock], [], [], timeout)
        if readable:
            now = time.monotonic()
            try:
                data = sock.recv(1 << 20)
            except OSError:  # ENOBUFS: the kernel dropped messages; their packets are lost, like on a full link
                continue
            pending.extend((now + delay, pid) for pid in packet_ids(data))
        now = time.monotonic()
        last_due = None
        while pending and pending[0][0] <= now + 0.001:
            last_due = pending.popleft()[1]
        if last_due is not None:  # one batch verdict accepts every queued packet up to this id
            sock.send(_message(NFQNL_MSG_VERDICT_BATCH, queue,
                               _attr(NFQA_VERDICT_HDR, struct.pack("!II", NF_ACCEPT, last_due))))
    if pending:
        sock.send(_message(NFQNL_MSG_VERDICT_BATCH, queue,
                           _attr(NFQA_VERDICT_HDR, struct.pack("!II", NF_ACCEPT, pending[-1][1]))))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--queue", type=int, required=True)
    parser.add_argument("--delay-ms", type=float, required=True)
    args = parser.parse_args(argv)
    run(args.queue, args.delay_ms)
    return 0


if __name__ == "__main__":
    sys.exit(main())
