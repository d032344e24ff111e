"""``python -m broker config/server.properties [--override key=value ...]`` (kafka-server-start.sh)."""

from __future__ import annotations

import argparse
import asyncio
import ctypes
import faulthandler
import gc
import io
import logging
import os
import resource
import signal
import sys
import threading
import traceback

from broker.config import KafkaConfig
from broker.config_defs import ConfigError
from broker.kafka_server import KafkaServer
from storage import clock

log = logging.getLogger("broker")


def _configure_logging() -> None:
    logging.basicConfig(
        stream=sys.stderr, level=logging.INFO,
        format="[%(asctime)s,%(msecs)03d] %(levelname)s %(message)s (%(name)s)", datefmt="%Y-%m-%d %H:%M:%S",
        force=True,
    )
    logging.getLogger("kazoo").setLevel(logging.WARNING)


def _dump_stacks() -> None:
    """SIGUSR1: log every thread's and every asyncio task's stack, as jstack does for Kafka, to see
    what a broker that stopped answering is waiting for."""
    out = io.StringIO()
    frames = sys._current_frames()
    for thread in threading.enumerate():
        frame = frames.get(thread.ident or -1)
        if frame is not None:
            out.write(f"\n--- thread {thread.name}\n{''.join(traceback.format_stack(frame))}")
    for task in asyncio.all_tasks():
        out.write(f"\n--- task {task.get_name()} {task.get_coro()!r}\n")
        task.print_stack(file=out)
    log.warning("Stack dump on SIGUSR1:%s", out.getvalue())


def watch_slow_callbacks(loop: asyncio.AbstractEventLoop, threshold_ms: float) -> None:
    """Log every event-loop callback that runs longer than ``threshold_ms`` (asyncio's debug mode,
    which uvloop implements too): everything the broker serves waits while one callback runs, so
    these are the places that block. Debug mode costs time of its own: for diagnosis, not production."""
    loop.set_debug(True)
    loop.slow_callback_duration = threshold_ms / 1000


def _raise_open_files_limit() -> None:
    """Open files up to the hard limit, as the JVM does for Kafka (HotSpot's MaxFDLimit): each
    partition holds its active segment's log open (its indexes are mapped without one,
    storage/mapped_file.py), and every client connection takes one more."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != hard:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
        except (ValueError, OSError) as exc:
            log.warning("Could not raise the open files limit from %d to %d: %s", soft, hard, exc)
            return
    log.info("Open files limit: %s", "unlimited" if hard == resource.RLIM_INFINITY else hard)


# glibc's mallopt parameters (malloc.h) and what the broker sets them to.
M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3
MMAP_THRESHOLD_BYTES = 32 << 20  # glibc's upper bound for it on 64-bit
TRIM_THRESHOLD_BYTES = 128 << 20


def _keep_freed_memory() -> None:
    """Let glibc reuse freed megabyte buffers instead of handing them back to the kernel.

    A produced batch of a megabyte passes through several buffers of its size (the request frame,
    a decompressed copy, the records checked); by default glibc maps such a buffer afresh and
    unmaps it when freed, or trims the heap under it, and every page of the next one faults in
    again: 0.72 minor faults per 1 KiB lz4 message, 1.15 us of the broker's 2.15 us of CPU per
    message (librdkafka, acks=1). With the buffers kept the faults go to zero and the cost to
    0.58-0.83 us (two runs). The price is that memory freed after a burst stays in the process up to
    TRIM_THRESHOLD_BYTES (a JVM broker keeps its whole heap)."""
    try:
        libc = ctypes.CDLL(None)
        mallopt = libc.mallopt
    except (OSError, AttributeError):  # not glibc: its own allocator's defaults
        return
    if not (mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES) and mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD_BYTES)):
        log.warning("Could not tune the memory allocator (mallopt refused); large batches will cost page faults")


async def _run(config: KafkaConfig, slow_callback_ms: float | None = None) -> int:
    _raise_open_files_limit()
    _keep_freed_memory()
    server = KafkaServer(config)
    loop = asyncio.get_running_loop()
    if slow_callback_ms is not None:
        watch_slow_callbacks(loop, slow_callback_ms)
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    loop.add_signal_handler(signal.SIGUSR1, _dump_stacks)
    # SIGQUIT (kill -3, a JVM's thread dump): every thread's stack from the signal handler itself,
    # so it answers even when the event loop is stuck and SIGUSR1's dump would never run.
    faulthandler.register(signal.SIGQUIT, file=sys.stderr, all_threads=True)
    if test_clock_file := os.environ.get(clock.TEST_CLOCK_OFFSET_FILE_ENV):  # tests/faults only
        loop.add_signal_handler(signal.SIGUSR2, clock.apply_test_clock_offset, test_clock_file)
    try:
        await server.startup()
    except Exception as exc:
        log.error("Fatal error during KafkaServer startup. Prepare to shutdown: %s", exc, exc_info=True)
        return 1
    # What start-up built (modules, config, loaded logs, metadata) lives as long as the process: kept
    # out of the cyclic collector's way, a full collection under load pauses the event loop for
    # about a millisecond instead of 15-25 (objects freed by reference counting still are).
    gc.collect()
    gc.freeze()
    await stop.wait()
    try:
        await server.shutdown()
    except Exception as exc:
        log.error("Error during KafkaServer shutdown: %s", exc, exc_info=True)
        return 1
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m broker", description="Start a Kafka-compatible broker.")
    parser.add_argument("config", help="server.properties")
    parser.add_argument("--override", action="append", default=[], metavar="key=value",
                        help="override a property of the file (repeatable)")
    parser.add_argument("--slow-callback-ms", type=float, metavar="MS",
                        help="log event-loop callbacks slower than MS (asyncio debug mode; slows the broker)")
    args = parser.parse_args(argv)
    _configure_logging()
    try:
        config = KafkaConfig.load(args.config, args.override)
    except ConfigError as exc:
        log.error("Invalid configuration: %s", exc)
        return 1
    except OSError as exc:
        log.error("Cannot read %s: %s", args.config, exc)
        return 1
    try:
        import uvloop
        runner = uvloop.run
    except ImportError:
        runner = asyncio.run
    return runner(_run(config, args.slow_callback_ms))


if __name__ == "__main__":
    sys.exit(main())
