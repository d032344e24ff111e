"""py-spy profiles of our broker during bench/vs_kafka.py rows, and where their time goes.

``Profiler.recording`` runs ``py-spy record --idle`` (speedscope format, one file per broker
process) for the duration of a with-block. Each sample pauses the broker for a moment; Python
frames only, at 100 Hz, that costs a profiled row a few percent (``--native``, which also shows C
frames and system calls, pauses it for milliseconds: p99 latencies grow tenfold), so the numbers
of a profiled run are not for the table, its shares are what count.

Run as a script, this summarises such files per thread. A sample is idle when the thread waits
(uvloop in epoll: the loop's ``run`` as the deepest Python frame without native frames, which
also holds uvloop's own C work; a worker thread on its queue; a lock or condition); of the others
it reports
how busy the thread was (busy samples over rate x duration), the Python functions the busy samples
were in (the deepest Python frame: its own bytecode and the C calls it made), the native leaf
frames (system calls such as sendmsg, pwrite), Python functions inclusive, and named parts of
the request path.

    python bench/vs_kafka_profile.py PROFILE.json [--top 20]
"""

from __future__ import annotations

import argparse
import json
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

PY_SPY = Path(sys.executable).parent / "py-spy"
REPO = Path(__file__).resolve().parents[1]

# Parts of the request path, as (name, substrings of "file:function" any frame of a sample may match).
PARTS: list[tuple[str, tuple[str, ...]]] = [
    ("network: socket reads", ("processor.py:_read", "kafka_channel.py:read", "recv")),
    ("network: socket writes", ("processor.py:_write", "kafka_channel.py:write", "sendmsg", "sendfile")),
    ("request header/body decode", ("protocol/framing", "protocol/codec", "decode")),
    ("response encode", ("encode",)),
    ("produce: record validation", ("produce_validator", "validate")),
    ("produce: log append", ("storage/log.py:append", "log_segment.py:append", "pwrite")),
    ("index", ("index",)),
    ("fetch: log read", ("storage/log.py:read", "log_segment.py:read")),
    ("replication fetcher", ("replica_fetcher",)),
    ("purgatory (delayed produce/fetch)", ("delayed_",)),
    ("metrics", ("broker/metrics",)),
    ("logging", ("logging/",)),
]


class Profiler:
    def __init__(self, directory: Path, rate: int = 100, native: bool = False) -> None:
        self.directory = directory
        self.rate = rate
        self.native = native
        directory.mkdir(parents=True, exist_ok=True)

    @contextmanager
    def recording(self, name: str, pids: Mapping[str, int]) -> Iterator[None]:
        spies = {label: subprocess.Popen(
            [str(PY_SPY), "record", "--pid", str(pid), "--rate", str(self.rate), "--format", "speedscope",
             "--idle", *(["--native"] if self.native else []), "--output", str(self.directory / f"{name}.{label}.json")],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE) for label, pid in pids.items()}
        time.sleep(1.0)  # attached
        start = time.monotonic()
        try:
            yield
        finally:
            seconds = time.monotonic() - start
            for label, spy in spies.items():
                spy.send_signal(signal.SIGINT)
                try:
                    _, err = spy.communicate(timeout=120)
                except subprocess.TimeoutExpired:
                    spy.kill()
                    _, err = spy.communicate()
                if spy.returncode:
                    print(f"py-spy for {name} ({label}) exited with {spy.returncode}: {err.decode()[-500:]}",
                          file=sys.stderr)
                (self.directory / f"{name}.{label}.seconds").write_text(f"{seconds:.3f}\n")


# A thread waiting: its deepest Python frame is one of these, or (main thread) uvloop sits in epoll.
IDLE_PYTHON = {"Condition.wait", "_worker", "EpollSelector.select", "Queue.get", "Event.wait", "select",
               "SimpleQueue.get"}
IDLE_NATIVE = ("epoll_wait", "epoll_pwait")


@dataclass
class Frame:
    name: str
    file: str

    @property
    def python(self) -> bool:
        return self.file.endswith(".py") or self.file.startswith("<")

    def __str__(self) -> str:
        return f"{_short(self.file)}:{self.name}" if self.python else f"{self.name} [{Path(self.file).name}]"


def summarize(path: Path, top: int, rate: int, seconds: float | None, min_busy: int = 20) -> str:
    data = json.loads(path.read_text())
    frames = [Frame(f["name"], f.get("file") or "") for f in data["shared"]["frames"]]
    out = [f"{path.name}" + (f" ({seconds:.1f} s at {rate} Hz)" if seconds else "")]
    for profile in sorted(data["profiles"], key=lambda p: -len(p["samples"])):
        by_python: Counter[str] = Counter()
        by_native: Counter[str] = Counter()
        inclusive: Counter[str] = Counter()
        parts: Counter[str] = Counter()
        busy = 0
        for stack in profile["samples"]:
            chain = [frames[i] for i in stack]
            python = [f for f in chain if f.python]
            deepest = python[-1] if python else None
            if (deepest is not None and deepest.name in IDLE_PYTHON) or any(
                    f.name.startswith(IDLE_NATIVE) for f in chain[-3:]) or (
                    deepest is not None and deepest.name == "Runner.run" and chain[-1].python):
                continue
            busy += 1
            by_python[str(deepest)] += 1
            if not chain[-1].python:
                by_native[str(chain[-1])] += 1
            names = {str(f) for f in python}
            for name in names:
                inclusive[name] += 1
            every = " ".join(str(f) for f in chain)
            for part, needles in PARTS:
                if any(needle in every for needle in needles):
                    parts[part] += 1
        if busy < min_busy:
            continue
        share = f", busy {busy / (rate * seconds):.0%} of the time" if seconds else ""
        out.append(f"\n{profile['name']}: {busy} busy samples of {len(profile['samples'])}{share}")
        for title, counter in (("in Python function (deepest Python frame)", by_python),
                               ("native leaf (system calls, C)", by_native), ("inclusive", inclusive)):
            out.append(f"  {title}:")
            out += [f"    {n / busy:6.1%}  {name}" for name, n in counter.most_common(top)]
        out.append("  parts of the request path (inclusive, overlapping):")
        out += [f"    {parts[part] / busy:6.1%}  {part}" for part, _ in PARTS if parts[part]]
    return "\n".join(out)


def _short(file: str) -> str:
    for root in ("site-packages/", f"{REPO}/", "/lib/python3.11/"):
        if root in file:
            return file.split(root, 1)[1]
    return file


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("profiles", nargs="+", type=Path)
    parser.add_argument("--top", type=int, default=20)
    parser.add_argument("--rate", type=int, default=100, help="the sampling rate the profiles were taken at")
    args = parser.parse_args()
    for path in args.profiles:
        seconds_file = path.with_name(path.name.removesuffix(".json") + ".seconds")
        seconds = float(seconds_file.read_text()) if seconds_file.exists() else None
        print(summarize(path, args.top, args.rate, seconds), end="\n\n")


if __name__ == "__main__":
    main()
