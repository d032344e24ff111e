"""Checkers over a round's history and what the cluster kept afterwards.

Each returns counts and a list of violations (human-readable, naming the record or commit). What
they hold the cluster to (acks=all, min.insync.replicas=2, RF=3, idempotent producers):

- every acknowledged write is in the log, at the partition and offset it was acknowledged at;
- no value written by an idempotent producer is in the log twice;
- one producer's values are in send order within each partition;
- the group consumed every acknowledged write (at least once, with commits);
- committed offsets never go backwards: in ``__consumer_offsets`` order, and for clients (a member
  that got a partition after a commit of it completed never commits below that commit);
- a generation's assignment (as the coordinator recorded it) gives each partition to one member,
  and each assignment a client received is one the coordinator recorded;
- for a transactional copy: read_committed never shows aborted data (nor data of a transaction
  still open) and shows every committed record, judged against the COMMIT/ABORT markers in the log
  itself; the committed copy holds each input record at most once (with "consumed every
  acknowledged write", exactly once) and nothing that is not in the input.
"""
from __future__ import annotations

import bisect
from collections import Counter, defaultdict
from dataclasses import dataclass, field

from tests.faults.history import ConsumerHistory, GroupRecord, LogRecord, ProducerHistory, TxnLogRecord


@dataclass
class ProducerCheck:
    acknowledged: int
    lost: int
    duplicated: int
    unacknowledged_present: int  # failed or unanswered writes that made it: allowed
    violations: list[str] = field(default_factory=list)  # besides loss and duplicates
    examples: list[str] = field(default_factory=list)    # of lost and duplicated writes


def _sequence(prefix: str, value: str | None) -> int | None:
    if value is None or not value.startswith(prefix + "."):
        return None
    try:
        return int(value[len(prefix) + 1:])
    except ValueError:
        return None


def check_producer(history: ProducerHistory, log: list[LogRecord]) -> ProducerCheck:
    ours = [(r, seq) for r in log if (seq := _sequence(history.prefix, r.value)) is not None]
    counts = Counter(r.value for r, _ in ours)
    where = {(r.partition, r.offset): r.value for r, _ in ours}
    acked = history.acked
    lost = [v for v in acked if v not in counts]
    duplicated = [v for v, n in counts.items() if n > 1]
    examples = [f"acknowledged {v} at {acked[v][0]}@{acked[v][1]} is not in the log" for v in lost[:5]]
    examples += [f"{v} is in the log {counts[v]} times" for v in duplicated[:5]]
    violations = []
    # librdkafka acknowledges some writes without an offset (offset None: an idempotent retry it
    # learns was persisted from the broker's answer to a later batch); those must be in their partition.
    partition_of = {r.value: r.partition for r, _ in ours}
    moved = [(v, p, o) for v, (p, o) in acked.items() if v in counts and where.get((p, o)) != v
             and not (o is None and partition_of[v] == p)]
    violations += [f"acknowledged {v} at {p}@{o}, but that offset holds {where.get((p, o))!r}" for v, p, o in moved[:5]]
    last: dict[int, tuple[int, int]] = {}
    for record, seq in sorted(ours, key=lambda rs: (rs[0].partition, rs[0].offset)):
        previous = last.get(record.partition)
        if previous is not None and seq < previous[1]:
            violations.append(f"partition {record.partition}: {record.value} at offset {record.offset} "
                              f"after {history.prefix}.{previous[1]} at {previous[0]}")
        last[record.partition] = (record.offset, seq)
    return ProducerCheck(len(acked), len(lost), len(duplicated), len(set(counts) - set(acked)), violations[:20],
                         examples)


def check_consumed_all(consumers: ConsumerHistory, producer: ProducerHistory) -> list[str]:
    consumed = {value for _, _, _, value in consumers.consumed}
    missing = [v for v in producer.acked if v not in consumed]
    return [f"group {consumers.group} never consumed {len(missing)} acknowledged writes, e.g. {missing[:3]}"] \
        if missing else []


def check_client_commits(consumers: ConsumerHistory) -> list[str]:
    """A member that was assigned partition p at time t commits p at or above every commit of p that
    completed before t (it fetched its position after that commit), and never below its own."""
    completed: dict[int, list[tuple[float, int]]] = defaultdict(list)
    for commit in consumers.commits:
        for partition, offset in commit.offsets.items():
            completed[partition].append((commit.completed, offset))
    floors: dict[int, tuple[list[float], list[int]]] = {}
    for partition, entries in completed.items():
        entries.sort()
        running, maxima = -1, []
        for _, offset in entries:
            running = max(running, offset)
            maxima.append(running)
        floors[partition] = ([t for t, _ in entries], maxima)
    assigned: dict[str, list[tuple[float, frozenset[int]]]] = defaultdict(list)
    for a in consumers.assignments:
        if not a.revoked:
            assigned[a.member].append((a.time, a.partitions))
    violations = []
    own_last: dict[tuple[str, int, float], int] = {}
    for commit in sorted(consumers.commits, key=lambda c: c.issued):
        for partition, offset in commit.offsets.items():
            epoch_start = max((t for t, parts in assigned[commit.member] if t <= commit.issued and partition in parts),
                              default=None)
            if epoch_start is None:
                continue
            times, maxima = floors[partition]
            index = bisect.bisect_left(times, epoch_start) - 1
            if index >= 0 and offset < maxima[index]:
                violations.append(f"{commit.member} committed {offset} for partition {partition} although "
                                  f"{maxima[index]} was committed before it got the partition")
            previous = own_last.get((commit.member, partition, epoch_start))
            if previous is not None and offset < previous:  # its position went back: it was reset
                violations.append(f"{commit.member} committed {offset} for partition {partition} after {previous}")
            own_last[(commit.member, partition, epoch_start)] = offset
    return violations[:10]


def check_group_log(consumers: ConsumerHistory, records: list[GroupRecord], member_ids_known: bool) -> list[str]:
    """Commits in the coordinator's log never go backwards; one owner per partition per generation;
    every assignment a client received is the coordinator's record of its generation."""
    violations = []
    last: dict[int, int] = {}
    recorded: dict[str, set[frozenset[int]]] = defaultdict(set)
    for record in records:
        if record.group != consumers.group:
            continue
        if record.offset is not None and record.topic == consumers.topic and record.partition is not None:
            previous = last.get(record.partition)
            if previous is not None and record.offset < previous:
                violations.append(f"__consumer_offsets: {consumers.group} partition {record.partition} "
                                  f"committed {record.offset} after {previous}")
            last[record.partition] = record.offset
        if record.assignments is not None:
            owners: dict[int, list[str]] = defaultdict(list)
            for member, topics in record.assignments.items():
                partitions = topics.get(consumers.topic, [])
                recorded[member].add(frozenset(partitions))
                for partition in partitions:
                    owners[partition].append(member)
            violations += [f"generation {record.generation}: partition {p} assigned to {members}"
                           for p, members in owners.items() if len(members) > 1]
    if member_ids_known:
        for a in consumers.assignments:
            if not a.revoked and a.partitions and a.partitions not in recorded.get(a.member, set()):
                violations.append(f"{a.member} was assigned {sorted(a.partitions)}, which no generation of "
                                  f"{consumers.group} recorded")
    return violations[:10]


def check_transactional_copy(input_log: list[LogRecord], fates: list[TxnLogRecord],
                             committed_read: list[LogRecord]) -> list[str]:
    """The copy's log (each record's fate from the markers) against what a read_committed consumer read."""
    fate = {(r.partition, r.offset): r for r in fates}
    shown = {(r.partition, r.offset) for r in committed_read}
    violations = []
    for key in sorted(shown):
        record = fate.get(key)
        if record is None:
            violations.append(f"read_committed returned {key[0]}@{key[1]}, which is no data record of the log")
        elif record.state != "committed":
            violations.append(f"read_committed returned {record.value} at {key[0]}@{key[1]}, whose transaction "
                              f"(producer {record.producer_id}) is {record.state}")
    hidden = [r for r in fates if r.state == "committed" and (r.partition, r.offset) not in shown]
    violations += [f"read_committed never returned committed {r.value} at {r.partition}@{r.offset}"
                   for r in hidden[:5]]
    still_open = [r for r in fates if r.state == "open"]
    if still_open:
        violations.append(f"{len(still_open)} records of transactions never ended, e.g. {still_open[0]}")
    copies = Counter(r.value for r in fates if r.state == "committed")
    violations += [f"{value} is in the committed copy {n} times" for value, n in copies.items() if n > 1][:5]
    inputs = {r.value for r in input_log}
    violations += [f"{value} is in the committed copy but not in the input" for value in copies
                   if value not in inputs][:5]
    return violations[:20]
