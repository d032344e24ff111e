"""CleanerProcess: where one cleaner thread's rounds run, so that compaction gets a core of its own.

A cleaning round is CPU work in Python (reading every dirty batch, the offset map, copying and
rebuilding batches); in the broker's process it would hold the interpreter lock that the
network and request threads need (produce throughput into a compacted topic dropped by a third
to a half while its cleaner ran). Each cleaner thread therefore starts a process of its own (spawned
at its first round, so brokers without compacted data never pay for it) and waits for it while
the process runs the round with the same ``Cleaner``. What needs the broker's ``Log`` stays
with the thread: the process asks it, over a pipe, for the segments of a range (their facts and,
by SCM_RIGHTS, their open descriptors, so renames and deletions do not pull files from under
it), the aborted transactions, the live producers, and to swap each cleaned segment in. Aborts
and shutdown reach it through a shared flag it checks per I/O buffer, as the in-process cleaner
checks; the I/O throttle is shared memory, one rate across every cleaner process; its log lines
are the broker's (relayed over the pipe). Message flow, process to thread: ``call`` (answered),
``log``, then one of ``done``, ``aborted`` or ``failed``.
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import socket
import time
import traceback
from collections.abc import Callable
from multiprocessing.connection import Connection
from multiprocessing.reduction import recvfds, sendfds
from typing import Any

from storage.cleaner.cleaner import Cleaner, CleanerStats
from storage.cleaner.cleaner_config import CleanerConfig
from storage.cleaner.cleaning_source import LocalCleaningSource, SegmentToClean
from storage.cleaner.offset_map import OffsetMap
from storage.cleaner.throttler import Throttler
from storage.errors import LogCleaningAbortedError
from storage.log_config import LogConfig
from storage.log_files import CLEANED_SUFFIX
from storage.log_segment import LogSegment

log = logging.getLogger("storage.cleaner.LogCleaner")

# Spawned, not forked: the broker has threads (and an event loop) a fork would copy mid-flight.
CONTEXT = multiprocessing.get_context("spawn")
POLL_S = 0.05  # how often the waiting thread looks for an abort or shutdown to pass on
FDS_PER_MESSAGE = 200  # Linux takes at most 253 descriptors in one SCM_RIGHTS message
STOP_TIMEOUT_S = 10.0


class CleanerProcessError(Exception):
    """The cleaner process failed a round (its traceback in the message) or ended."""


class CleanerProcess:
    """The process behind one cleaner thread (``clean`` is called from that thread only)."""

    def __init__(self, thread_id: int, config: CleanerConfig, throttler: Throttler) -> None:
        self.thread_id = thread_id
        self.config = config
        self.throttler = throttler
        self._process: Any = None
        self._conn: Connection | None = None
        self._abort: Any = None  # a shared flag, made with the first process

    @property
    def pid(self) -> int | None:
        return None if self._process is None else self._process.pid

    def clean(self, log_to_clean: Any, now: int, check_done: Callable[[], None]) -> tuple[int, CleanerStats]:
        """One round of ``log_to_clean`` (a LogToClean) in the process; ``check_done`` raises
        when the round must stop (an abort, or the thread's shutdown), and that is what this raises."""
        conn = self._start()
        source = LocalCleaningSource(log_to_clean.log)
        self._abort.clear()
        conn.send(("clean", source.topic_partition, source.dir, source.config, log_to_clean.first_dirty_offset,
                   log_to_clean.first_uncleanable_offset, now))
        stopped: BaseException | None = None  # what check_done raised, passed on as the abort flag
        stop_by = 0.0
        try:
            while True:
                if stopped is None:
                    stopped = self._check(check_done)
                    stop_by = time.monotonic() + STOP_TIMEOUT_S
                if not conn.poll(POLL_S):
                    if stopped is not None and time.monotonic() > stop_by:
                        log.warning("Cleaner process %s did not stop its round in %.0f s; killing it", self.pid,
                                    STOP_TIMEOUT_S)
                        self._kill()
                        raise stopped
                    continue
                message = conn.recv()
                kind = message[0]
                if kind == "log":
                    record = logging.makeLogRecord(message[1])
                    logging.getLogger(record.name).handle(record)
                elif kind == "call":
                    if message[1] == "swap" and stopped is None:  # an abort that came while it was written
                        stopped = self._check(check_done)
                    if message[1] == "swap" and stopped is not None:
                        conn.send(("aborted",))
                    else:
                        self._answer(conn, source, message[1], message[2])
                elif kind == "done":
                    return message[1], message[2]
                elif kind == "aborted":
                    raise stopped if stopped is not None else LogCleaningAbortedError(source.topic_partition)
                else:
                    raise CleanerProcessError(message[1])
        except (EOFError, OSError) as exc:
            code = self._process.exitcode if self._process is not None else None
            self._forget()
            raise CleanerProcessError(f"the cleaner process of thread {self.thread_id} ended (exit code {code})") \
                from exc

    def _check(self, check_done: Callable[[], None]) -> BaseException | None:
        """What ``check_done`` raises, if anything; then the process is told to stop at its next check."""
        try:
            check_done()
        except BaseException as exc:  # noqa: BLE001 - re-raised once the process has stopped
            self._abort.set()
            return exc
        return None

    def _answer(self, conn: Connection, source: LocalCleaningSource, method: str, args: tuple[Any, ...]) -> None:
        try:
            if method == "segments":
                segments = source.segments(*args)
                conn.send(("ok", [segment.facts() for segment in segments]))
                _send_fds(conn, [segment.log.fileno() for segment in segments])
                return
            if method == "swap":
                base_offset, sources = args
                cleaned = LogSegment.open(source.dir, base_offset, source.config, file_suffix=CLEANED_SUFFIX)
                source.swap(cleaned, sources)
                result = None
            elif method == "aborted_transactions":
                result = source.aborted_transactions(*args)
            elif method == "active_producers":
                result = source.active_producers()
            else:
                raise ValueError(f"unknown cleaner call {method!r}")
        except LogCleaningAbortedError:
            conn.send(("aborted",))
            return
        except Exception as exc:  # noqa: BLE001 - the process fails the round with it
            conn.send(("error", _describe(exc)))
            return
        conn.send(("ok", result))

    def _start(self) -> Connection:
        if self._process is not None and self._process.is_alive():
            assert self._conn is not None
            return self._conn
        self._forget()
        self.throttler.share(CONTEXT)
        if self._abort is None:
            self._abort = CONTEXT.Event()
        ours, theirs = CONTEXT.Pipe(duplex=True)
        self._process = CONTEXT.Process(
            target=run_cleaner_process, name=f"kafka-log-cleaner-process-{self.thread_id}", daemon=True,
            args=(theirs, self.thread_id, self.config, self.throttler, self._abort, os.getpid(),
                  log.getEffectiveLevel()),
        )
        self._process.start()
        theirs.close()
        self._conn = ours
        log.info("Started cleaner process %d for cleaner thread %d", self._process.pid, self.thread_id)
        return ours

    def _forget(self) -> None:
        if self._conn is not None:
            self._conn.close()
        if self._process is not None:
            self._process.join(0)
        self._conn = self._process = None

    def stop(self) -> None:
        """Let the process end (between rounds: the thread has stopped waiting for it)."""
        if self._process is None:
            return
        process = self._process
        try:
            assert self._conn is not None
            self._conn.send(("stop",))
        except OSError:
            pass
        process.join(STOP_TIMEOUT_S)
        if process.is_alive():
            log.warning("Cleaner process %d did not stop; killing it", process.pid)
        self._kill()

    def _kill(self) -> None:
        if self._process is not None and self._process.is_alive():
            self._process.kill()
            self._process.join()
        self._forget()


def _describe(exc: BaseException) -> str:
    return "".join(traceback.format_exception(exc)).rstrip()


def _send_fds(conn: Connection, fds: list[int]) -> None:
    with socket.socket(fileno=os.dup(conn.fileno())) as sock:
        for i in range(0, len(fds), FDS_PER_MESSAGE):
            sendfds(sock, fds[i:i + FDS_PER_MESSAGE])


def _recv_fds(conn: Connection, count: int) -> list[int]:
    fds: list[int] = []
    with socket.socket(fileno=os.dup(conn.fileno())) as sock:
        while len(fds) < count:
            fds.extend(recvfds(sock, min(FDS_PER_MESSAGE, count - len(fds))))
    return fds


# --- in the cleaner process ---------------------------------------------------------------
class _RemoteCleaningSource:
    """The CleaningSource of a round in the process: every answer comes from the broker's thread."""

    def __init__(self, conn: Connection, topic_partition: str, directory: str, config: LogConfig) -> None:
        self._conn = conn
        self.topic_partition = topic_partition
        self.dir = directory
        self.config = config
        self._fds: list[int] = []

    def _call(self, method: str, *args: Any) -> Any:
        self._conn.send(("call", method, args))
        reply = self._conn.recv()
        if reply[0] == "ok":
            return reply[1]
        if reply[0] == "aborted":
            raise LogCleaningAbortedError(f"the segments of {self.topic_partition} changed during cleaning")
        raise CleanerProcessError(reply[1])

    def segments(self, start_offset: int, end_offset: int) -> list[SegmentToClean]:
        facts = self._call("segments", start_offset, end_offset)
        fds = _recv_fds(self._conn, len(facts))
        self._fds.extend(fds)
        return [SegmentToClean.from_facts(f, fd) for f, fd in zip(facts, fds, strict=True)]

    def aborted_transactions(self, start_offset: int, upper_bound_offset: int) -> Any:
        return self._call("aborted_transactions", start_offset, upper_bound_offset)

    def active_producers(self) -> Any:
        return self._call("active_producers")

    def swap(self, cleaned: LogSegment, base_offsets: list[int]) -> None:
        cleaned.close()  # the broker opens it from its files; on an abort it deletes them
        self._call("swap", cleaned.base_offset, base_offsets)

    def close(self) -> None:
        for fd in self._fds:
            os.close(fd)
        self._fds.clear()


class _RelayHandler(logging.Handler):
    """Sends each log record to the broker, which logs it as its own."""

    def __init__(self, conn: Connection) -> None:
        super().__init__()
        self._conn = conn

    def emit(self, record: logging.LogRecord) -> None:
        fields = dict(record.__dict__)
        fields["msg"], fields["args"] = record.getMessage(), None
        if record.exc_info:
            fields["exc_text"] = logging.Formatter().formatException(record.exc_info)
        fields["exc_info"] = None
        self._conn.send(("log", fields))


def run_cleaner_process(conn: Connection, thread_id: int, config: CleanerConfig, throttler: Throttler,
                        abort: Any, broker_pid: int, log_level: int) -> None:
    """The process's main loop: one round per ``clean`` message until ``stop`` or the broker is gone."""
    root = logging.getLogger()
    root.handlers[:] = [_RelayHandler(conn)]
    root.setLevel(log_level)

    def check_done(_tp: tuple[str, int]) -> None:
        if abort.is_set():
            raise LogCleaningAbortedError("cleaning aborted")
        if os.getppid() != broker_pid:  # the broker died: nothing may be written for it any more
            os._exit(1)

    cleaner = Cleaner(thread_id, OffsetMap(config.offset_map_memory), config.io_buffer_per_thread,
                      config.max_message_size, config.dedupe_buffer_load_factor, throttler, check_done)
    while True:
        try:
            message = conn.recv()
        except (EOFError, OSError):
            return
        if message[0] == "stop":
            return
        _, topic_partition, directory, log_config, first_dirty_offset, upper_bound, now = message
        source = _RemoteCleaningSource(conn, topic_partition, directory, log_config)
        try:
            end, stats = cleaner.clean_source(source, first_dirty_offset, upper_bound, now)
        except LogCleaningAbortedError:
            reply: tuple[Any, ...] = ("aborted",)
        except (EOFError, ConnectionError):  # the pipe to the broker is gone
            return
        except Exception as exc:  # noqa: BLE001 - the broker marks the partition uncleanable
            reply = ("failed", _describe(exc))
        else:
            reply = ("done", end, stats)
        finally:
            source.close()
        try:
            conn.send(reply)
        except OSError:
            return
