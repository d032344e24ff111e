"""py-spy profiles of our broker during bench/vs_kafka.py rows, and where their time goes.

``Profiler.recording`` runs ``py-spy record`` (speedscope format, one file per broker process) for
the duration of a with-block. Run as a script, this summarises such files per thread: how busy
the thread was (samples over rate x duration; py-spy leaves out samples of threads waiting in a
system call such as epoll), the functions with the most samples on top of the stack (self) and
in the stack (inclusive), and the inclusive share of named parts of the request path.

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
from pathlib import Path

PY_SPY = Path(sys.executable).parent / "py-spy"

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
    def __init__(self, directory: Path, rate: int = 200) -> None:
        self.directory = directory
        self.rate = rate
        directory.mkdir(parents=True, exist_ok=True)

    @contextmanager
    def recording(self, name: str, pids: Mapping[str, int]) -> Iterator[None]:
        spies = {label: subprocess.Popen(
            [str(PY_SPY), "record", "--pid", str(pid), "--rate", str(self.rate), "--format", "speedscope",
             "--output", str(self.directory / f"{name}.{label}.json")],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE) for label, pid in pids.items()}
        time.sleep(0.5)  # attached
        start = time.monotonic()
        try:
            yield
        finally:
            seconds = time.monotonic() - start
            for label, spy in spies.items():
                spy.send_signal(signal.SIGINT)
                try:
                    _, err = spy.communicate(timeout=60)
                except subprocess.TimeoutExpired:
                    spy.kill()
                    _, err = spy.communicate()
                if spy.returncode:
                    print(f"py-spy for {name} ({label}) exited with {spy.returncode}: {err.decode()[-500:]}",
                          file=sys.stderr)
                (self.directory / f"{name}.{label}.seconds").write_text(f"{seconds:.3f}\n")


def summarize(path: Path, top: int, rate: int, seconds: float | None) -> str:
    data = json.loads(path.read_text())
    frames = [f"{_short(f.get('file', ''))}:{f['name']}" for f in data["shared"]["frames"]]
    out = [f"{path.name}" + (f" ({seconds:.1f} s at {rate} Hz)" if seconds else "")]
    for profile in sorted(data["profiles"], key=lambda p: -len(p["samples"])):
        samples: list[list[int]] = profile["samples"]
        weights: list[float] = profile.get("weights") or [1] * len(samples)
        total = sum(weights)
        if total < 0.01 * sum(len(p["samples"]) for p in data["profiles"]):
            continue
        busy = f", busy {total / (rate * seconds):.0%} of the time" if seconds else ""
        out.append(f"\n{profile['name']}: {total:.0f} samples{busy}")
        self_time: Counter[str] = Counter()
        inclusive: Counter[str] = Counter()
        parts: Counter[str] = Counter()
        for stack, weight in zip(samples, weights, strict=True):
            names = [frames[i] for i in stack]
            if names:
                self_time[names[-1]] += weight
            for name in set(names):
                inclusive[name] += weight
            for part, needles in PARTS:
                if any(needle in name for name in names for needle in needles):
                    parts[part] += weight
        out.append("  self (top of stack):")
        out += [f"    {n / total:6.1%}  {name}" for name, n in self_time.most_common(top)]
        out.append("  inclusive:")
        out += [f"    {n / total:6.1%}  {name}" for name, n in inclusive.most_common(top)]
        out.append("  parts of the request path (inclusive, overlapping):")
        out += [f"    {parts[part] / total:6.1%}  {part}" for part, _ in PARTS]
    return "\n".join(out)


def _short(file: str) -> str:
    for root in ("site-packages/", "/wt-perf-bench/", "/main/", "/lib/python3.11/"):
        if root in file:
            return file.split(root, 1)[1]
    return file


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("profiles", nargs="+", type=Path)
    parser.add_argument("--top", type=int, default=20)
    parser.add_argument("--rate", type=int, default=200, help="the sampling rate the profiles were taken at")
    args = parser.parse_args()
    for path in args.profiles:
        seconds_file = path.with_suffix("").with_suffix(".seconds")
        seconds = float(seconds_file.read_text()) if seconds_file.exists() else None
        print(summarize(path, args.top, args.rate, seconds), end="\n\n")


if __name__ == "__main__":
    main()
