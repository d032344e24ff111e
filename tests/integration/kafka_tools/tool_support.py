"""Running one of Kafka's tools against our broker and against real Kafka side by side.

``SideBySide.same(tool, args)`` runs ``bin/<tool>.sh`` against both brokers at once (``{bootstrap}``
in an argument is each side's address), normalises what legitimately differs between two clusters
(addresses, log dirs, topic ids, member ids, timestamps) and fails showing both outputs when they
still differ; it returns our (normalised) output for the test to check what it says.
"""
from __future__ import annotations

import re
import subprocess
import uuid
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from protocol.api_keys import ApiKey
from protocol.messages import CreateTopicsRequest, ProduceRequest
from protocol.records.builder import RecordBatchBuilder
from tests.harness.broker import BrokerProcess
from tests.harness.kafka_cli import KafkaCli

# (pattern, replacement) pairs applied to every output before comparing.
_COMMON_NORMALISATIONS: tuple[tuple[str, str], ...] = (
    (r"^\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}\] ", "[TS] "),       # log4j line prefix
    (r"TopicId: [A-Za-z0-9_-]{22}", "TopicId: ID"),
    (r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", "UUID"),  # member ids
    (r"(CreateTime|LogAppendTime):\s?\d+", r"\1:TS"),
)


def unique(prefix: str) -> str:
    """A topic or group name no other test uses (the same name on both sides)."""
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def create_topic(brokers: Sequence[BrokerProcess], topic: str, partitions: int = 1,
                 configs: Mapping[str, str] | None = None, assignment: Mapping[int, list[int]] | None = None) -> None:
    """Setup without a JVM: CreateTopics to the cluster's controller, then wait for the leaders."""
    entry = CreateTopicsRequest.CreatableTopic(
        name=topic, num_partitions=-1 if assignment else partitions, replication_factor=-1 if assignment else 1,
        assignments=[CreateTopicsRequest.CreatableReplicaAssignment(partition_index=p, broker_ids=ids)
                     for p, ids in (assignment or {}).items()],
        configs=[CreateTopicsRequest.CreatableTopicConfig(name=k, value=v) for k, v in (configs or {}).items()])
    controller_id = brokers[0].metadata([]).controller_id
    controller = next(b for b in brokers if b.broker_id == controller_id)
    answer = controller.request(ApiKey.CREATE_TOPICS, 7, CreateTopicsRequest(topics=[entry], timeout_ms=30000))
    assert answer.topics[0].error_code == 0, f"{controller} did not create {topic}: {answer.topics[0]}"
    for broker in brokers:
        broker.wait_for_leaders(topic, len(assignment) if assignment else partitions)


def timed_batch(records: Sequence[tuple[int, bytes, bytes]], codec: int = 0) -> bytes:
    """One record batch of (timestamp, key, value) records, the same bytes for both sides."""
    builder = RecordBatchBuilder(magic=2, compression=codec)
    for timestamp, key, value in records:
        builder.append(timestamp, key, value)
    return bytes(builder.build())


def produce_batches(broker: BrokerProcess, topic: str, batches: Iterable[bytes], partition: int = 0) -> None:
    """Each batch in its own Produce request (acks=all), so both sides store the same batches."""
    for batch in batches:
        request = ProduceRequest(acks=-1, timeout_ms=10000, topic_data=[ProduceRequest.TopicProduceData(
            name=topic, partition_data=[ProduceRequest.PartitionProduceData(index=partition, records=batch)])])
        answer = broker.request(ApiKey.PRODUCE, 9, request).responses[0].partition_responses[0]
        assert answer.error_code == 0, f"{broker} refused a batch for {topic}: {answer}"


@dataclass
class Outcome:
    """A tool's exit code and normalised output."""

    returncode: int
    stdout: str
    stderr: str

    def lines(self) -> list[str]:
        return self.stdout.splitlines()


@dataclass
class SideBySide:
    """Our brokers and Kafka's (the same number, the same ids) and the tools to run against them."""

    cli: KafkaCli
    ours: Sequence[BrokerProcess]
    kafka: Sequence[BrokerProcess]

    def side(self, side: int) -> Sequence[BrokerProcess]:
        return self.ours if side == 0 else self.kafka

    def bootstrap(self, side: int) -> str:
        return ",".join(broker.bootstrap for broker in self.side(side))

    def normalise(self, text: str, side: int, extra: Iterable[tuple[str, str]] = ()) -> str:
        text = text.replace(self.bootstrap(side), "BOOTSTRAP")
        for broker in self.side(side):
            text = text.replace(broker.bootstrap, f"BROKER{broker.broker_id}").replace(str(broker.log_dir), "LOGDIR")
        for pattern, replacement in (*_COMMON_NORMALISATIONS, *extra):
            text = re.sub(pattern, replacement, text, flags=re.MULTILINE)
        return text

    def create_topic(self, topic: str, partitions: int = 1, configs: Mapping[str, str] | None = None,
                     assignment: Mapping[int, list[int]] | None = None) -> None:
        """The same topic on both sides (setup through the protocol: a JVM start less per side)."""
        for side in (0, 1):
            create_topic(self.side(side), topic, partitions, configs, assignment)

    def produce(self, topic: str, batches: Sequence[bytes], partition: int = 0) -> None:
        """The same batches into both sides' partition (through its leader)."""
        for side in (0, 1):
            brokers = self.side(side)
            leader_id = brokers[0].metadata([topic]).topics[0].partitions[partition].leader_id
            produce_batches(next(b for b in brokers if b.broker_id == leader_id), topic, batches, partition)

    def run_one(self, side: int, tool: str, args: Sequence[str], *, input: str | None = None,
                timeout: float = 60.0) -> subprocess.CompletedProcess[str]:
        """The tool against one side; ``{bootstrap}`` in an argument becomes that side's address,
        ``{log_dir}`` its (first) broker's log dir."""
        log_dir = str(self.side(side)[0].log_dir)
        formatted = [a.replace("{bootstrap}", self.bootstrap(side)).replace("{log_dir}", log_dir) for a in args]
        return self.cli.run(tool, formatted, input=input, timeout=timeout, check=False)

    def run(self, tool: str, args: Sequence[str], *, input: str | None = None, timeout: float = 60.0,
            normalise: Iterable[tuple[str, str]] = ()) -> tuple[Outcome, Outcome]:
        """(ours, kafka): the tool against both at the same time, outputs normalised."""
        extra = tuple(normalise)
        with ThreadPoolExecutor(2) as pool:
            runs = [pool.submit(self.run_one, side, tool, args, input=input, timeout=timeout) for side in (0, 1)]
            done = [r.result() for r in runs]
        ours, kafka = (Outcome(d.returncode, self.normalise(d.stdout, side, extra), self.normalise(d.stderr, side, extra))
                       for side, d in enumerate(done))
        return ours, kafka

    def same(self, tool: str, args: Sequence[str], *, input: str | None = None, timeout: float = 60.0,
             normalise: Iterable[tuple[str, str]] = (), stderr: bool = False, sort: bool = False,
             only: str | None = None, ok: bool = True) -> Outcome:
        """Run against both; exit codes and stdout (and stderr with ``stderr``) must match after
        normalising (lines sorted with ``sort``, for tools that print in hash order; only the lines
        containing ``only`` when the cluster holds more than the test's own). With ``ok`` the tool
        must also succeed. Returns our outcome."""
        ours, kafka = self.run(tool, args, input=input, timeout=timeout, normalise=normalise)
        if only is not None:
            ours, kafka = (Outcome(o.returncode, "".join(line + "\n" for line in o.lines() if only in line), o.stderr)
                           for o in (ours, kafka))
        report = (f"{tool} {' '.join(args)}\n--- ours (exit {ours.returncode}) ---\n{ours.stdout}\n{ours.stderr}"
                  f"\n--- kafka (exit {kafka.returncode}) ---\n{kafka.stdout}\n{kafka.stderr}")
        if ok:
            assert kafka.returncode == 0, report
        assert ours.returncode == kafka.returncode, report
        key = sorted if sort else list
        assert key(ours.lines()) == key(kafka.lines()), report
        if stderr:
            assert key(ours.stderr.splitlines()) == key(kafka.stderr.splitlines()), report
        return ours
