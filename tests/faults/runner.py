"""Rounds: workloads start, the nemesis strikes and heals, the cluster must heal, the checkers judge.

A round on a healthy cluster: fresh topics (3 partitions, RF=3, min.insync.replicas=2), the
``java``, ``confluent``, ``consumer-protocol`` (ours only), ``share`` (ours, with --faults-share) and ``txn`` workloads on them
(``txn`` copies its topic to one more), ``WARMUP`` seconds of calm, the fault for its
duration, healing, the wait for a healthy cluster (its length is the recovery time, bounded by
``RECOVERY_BOUND``), the producers finishing, the groups catching up, then the whole topics and the
groups' ``__consumer_offsets`` records are read back and checked.
"""
from __future__ import annotations

import logging
import os
import random
import time
from collections.abc import Iterable
from datetime import datetime, timezone
from pathlib import Path

from tests.faults.checkers import check_client_commits, check_consumed_all, check_group_log, check_producer
from tests.faults.cluster import FaultCluster
from tests.faults.nemesis import Nemesis, NotSupported, mixed_schedule
from tests.faults.results import Cell, Report
from tests.faults.workloads import (
    RATE,
    ConfluentWorkload,
    ConsumerProtocolWorkload,
    JavaWorkload,
    ShareGroupWorkload,
    TransactionalCopyWorkload,
    Workload,
    WorkloadSpec,
    end_offsets,
    read_group_records,
    topic_ids,
    read_topic,
)
from tests.harness.kafka_cli import KafkaCli

log = logging.getLogger(__name__)

WARMUP = 2.0
TAIL = 2.0
RECOVERY_BOUND = 90.0
DRAIN_BOUND = 60.0
PARTITIONS = 3


def say(message: str) -> None:
    print(f"[faults {datetime.now():%H:%M:%S}] {message}", flush=True)


class Runner:
    def __init__(self, cluster: FaultCluster, work_dir: Path, report: Report, share: bool = False) -> None:
        self.cluster = cluster
        # The KIP-848 workload on our broker only (Kafka 3.9 in ZooKeeper mode does not serve it); the
        # KIP-932 one also only when asked (--faults-share), until full runs under load show that
        # every share-partition starts (docs/fault-injection.md).
        self.consumer_protocol = cluster.kind == "ours"
        self.share = share and self.consumer_protocol
        self.work_dir = work_dir
        self.cli = KafkaCli(work_dir / "tools")
        self.report = report
        self.rounds = 0

    def run(self, nemeses: Iterable[Nemesis]) -> None:
        start = time.monotonic()
        self.report.started = datetime.now(timezone.utc).isoformat(timespec="seconds")
        self.report.load = [os.getloadavg()[0]]
        try:
            for nemesis in nemeses:
                self.run_round(nemesis)
        finally:
            self.report.minutes = (time.monotonic() - start) / 60
            self.report.load.append(os.getloadavg()[0])

    def run_round(self, nemesis: Nemesis) -> list[Cell]:
        self.rounds += 1
        index = self.rounds
        self.cluster.wait_healthy(RECOVERY_BOUND)
        round_dir = self.work_dir / f"round-{index:03d}-{nemesis.name}"
        round_dir.mkdir(parents=True, exist_ok=True)
        topics = {"java": f"f{index:03d}-{nemesis.name}-java", "confluent": f"f{index:03d}-{nemesis.name}-ck",
                  "consumer-protocol": f"f{index:03d}-{nemesis.name}-cp", "share": f"f{index:03d}-{nemesis.name}-sh",
                  "txn": f"f{index:03d}-{nemesis.name}-tx", "txn-copy": f"f{index:03d}-{nemesis.name}-tx-copy"}
        for topic in topics.values():
            self.cluster.create_topic(topic, PARTITIONS)
        window = WARMUP + nemesis.duration + TAIL
        spec = WorkloadSpec(messages=int(RATE * window), deadline=time.monotonic() + window + RECOVERY_BOUND + 60)
        bootstrap = self.cluster.bootstrap
        workloads: list[Workload] = [JavaWorkload(self.cli, bootstrap, topics["java"], spec, round_dir),
                                     ConfluentWorkload(bootstrap, topics["confluent"], spec),
                                     TransactionalCopyWorkload(bootstrap, topics["txn"], topics["txn-copy"], spec)]
        if self.consumer_protocol:
            workloads.insert(2, ConsumerProtocolWorkload(bootstrap, topics["consumer-protocol"], spec))
        if self.share:
            workloads.insert(3, ShareGroupWorkload(bootstrap, topics["share"], spec))
        say(f"round {index}: {nemesis.name} for {nemesis.duration:.0f}s")
        recovery: float | None = None
        problems: list[str] = []
        supported = True
        try:
            for workload in workloads:
                workload.start()
            time.sleep(WARMUP)
            try:
                fault = nemesis.start(self.cluster, topics["java"])
            except NotSupported as exc:
                fault, supported = f"not supported: {exc}", False
            say(f"round {index}: {fault}")
            if supported:
                time.sleep(nemesis.duration)
                healing = time.monotonic()  # restarts done by stop() count into the recovery time
                nemesis.stop(self.cluster)
                try:
                    self.cluster.wait_healthy(RECOVERY_BOUND)
                    recovery = time.monotonic() - healing
                except AssertionError as exc:
                    problems.append(str(exc))
                    self.cluster.revive()
            self._wait_producers(workloads, spec)
            self._wait_drained(workloads, spec)
        finally:
            for workload in workloads:
                workload.stop()
        say(f"round {index}: healed in {recovery if recovery is None else round(recovery, 1)} s; checking")
        cells = self._check(index, nemesis, fault, supported, recovery, problems, workloads)
        self.report.cells += cells
        for cell in cells:
            say(f"round {index} {cell.nemesis} × {cell.workload}: {cell.acknowledged} acknowledged, {cell.lost} lost, "
                f"{cell.duplicated} duplicated, {len(cell.violations)} other violations ({cell.consumed} consumed, "
                f"{cell.commits} commits, {cell.generations} generations)")
            detail = next((w.detail for w in workloads if w.name == cell.workload and w.detail), None)
            if detail:
                say(f"  {detail}")
            for problem in (*cell.examples, *cell.violations):
                say(f"  {problem}")
        return cells

    def _wait_producers(self, workloads: list[Workload], spec: WorkloadSpec) -> None:
        while time.monotonic() < spec.deadline and not all(w.producer_done() for w in workloads):
            time.sleep(0.2)

    def _wait_drained(self, workloads: list[Workload], spec: WorkloadSpec) -> None:
        """Until each group has committed up to its topic's end (bounded)."""
        deadline = min(spec.deadline, time.monotonic() + DRAIN_BOUND)
        ends = {w.name: end_offsets(self.cluster.bootstrap, w.producer.topic) for w in workloads}
        while time.monotonic() < deadline:
            if all(w.drained(ends[w.name]) for w in workloads):
                return
            time.sleep(0.5)

    def _check(self, index: int, nemesis: Nemesis, fault: str, supported: bool, recovery: float | None,
               problems: list[str], workloads: list[Workload]) -> list[Cell]:
        bootstrap = self.cluster.bootstrap
        group_records = read_group_records(bootstrap, {w.consumers.group for w in workloads},
                                           topic_names=topic_ids(bootstrap, [w.consumers.topic for w in workloads]))
        cells = []
        for workload in workloads:
            own = workload.check(bootstrap)
            kept = read_topic(bootstrap, workload.producer.topic)
            produced = check_producer(workload.producer, kept)
            violations = list(problems) + own + produced.violations
            violations += check_consumed_all(workload.consumers, workload.producer)
            violations += check_client_commits(workload.consumers)
            violations += check_group_log(workload.consumers, group_records,
                                          member_ids_known=getattr(workload, "full_assignments", False))
            violations += [f"producer error: {e}" for e in workload.producer.errors if "fatal" in e.lower()]
            cells.append(Cell(
                round=index, nemesis=nemesis.name, workload=workload.name, fault=fault, supported=supported,
                acknowledged=produced.acknowledged, lost=produced.lost, duplicated=produced.duplicated,
                unacknowledged_present=produced.unacknowledged_present, failed_writes=workload.producer.failed,
                consumed=len(workload.consumers.consumed), commits=len(workload.consumers.commits),
                generations=sum(1 for r in group_records if r.group == workload.consumers.group and r.generation),
                recovery_s=recovery, violations=violations, examples=produced.examples))
        return cells


def soak(runner: Runner, minutes: float, seed: int) -> None:
    """Mixed faults, one per round, until ``minutes`` have passed."""
    rng = random.Random(seed)
    deadline = time.monotonic() + minutes * 60

    def rounds() -> Iterable[Nemesis]:
        while time.monotonic() < deadline:
            yield mixed_schedule(rng)

    runner.run(rounds())
