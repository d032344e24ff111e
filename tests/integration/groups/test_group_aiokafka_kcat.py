"""aiokafka's group consumer and kcat's balanced consumer (-G) against a real broker."""
from __future__ import annotations

import asyncio
import subprocess

from tests.harness.broker import BrokerProcess
from tests.integration.groups.group_helpers import produce, unique

PARTITIONS = 3


def test_aiokafka_group_consumer_reads_and_commits(broker: BrokerProcess) -> None:
    from aiokafka import AIOKafkaConsumer, TopicPartition

    topic, group = unique("t"), unique("g")
    broker.create_topic(topic, PARTITIONS)
    expected = set(produce(broker.bootstrap, topic, PARTITIONS, 4))

    async def run() -> tuple[set[bytes], dict[int, int | None]]:
        consumer = AIOKafkaConsumer(topic, bootstrap_servers=broker.bootstrap, group_id=group,
                                    auto_offset_reset="earliest", enable_auto_commit=False,
                                    session_timeout_ms=6000, heartbeat_interval_ms=1000)
        await consumer.start()
        try:
            seen: set[bytes] = set()
            while seen < expected:
                batch = await asyncio.wait_for(consumer.getmany(timeout_ms=500), 60)
                for messages in batch.values():
                    seen.update(m.value for m in messages)
            await consumer.commit()
            committed = {p: await consumer.committed(TopicPartition(topic, p)) for p in range(PARTITIONS)}
            return seen, committed
        finally:
            await consumer.stop()

    seen, committed = asyncio.run(run())
    assert seen == expected
    assert committed == {p: 4 for p in range(PARTITIONS)}


def test_kcat_balanced_consumer_prints_every_message(broker: BrokerProcess) -> None:
    topic, group = unique("t"), unique("g")
    broker.create_topic(topic, PARTITIONS)
    produce(broker.bootstrap, topic, PARTITIONS, 5)
    result = subprocess.run(
        ["kcat", "-b", broker.bootstrap, "-G", group, "-e", "-o", "beginning", "-f", "%p|%o|%s\n",
         "-X", "session.timeout.ms=6000", "-X", "heartbeat.interval.ms=1000", topic],
        capture_output=True, text=True, timeout=90)
    assert result.returncode == 0, result.stderr
    rows = sorted(result.stdout.splitlines())
    assert rows == sorted(f"{p}|{i}|m-{p}-{i}" for p in range(PARTITIONS) for i in range(5))
