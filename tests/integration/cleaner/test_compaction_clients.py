"""Compaction as users see it through real clients, on one broker whose cleaner backs off 100 ms:
key updates in every codec read back compacted, tombstones that go after delete.retention.ms,
consumer groups whose committed offsets were cleaned away, and Kafka's answers to bad input."""
from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from protocol.api_keys import ApiKey
from protocol.errors import Errors
from protocol.messages import IncrementalAlterConfigsRequest
from tests.harness.broker import BrokerProcess
from tests.harness.waiting import wait_for
from tests.harness.zookeeper import ZooKeeperServer
from tests.integration.cleaner.compaction_support import (
    CODECS,
    COMPACTED,
    Workload,
    cleaner_checkpoint,
    produce_key_updates,
    read_from_start,
    unique,
)

pytestmark = pytest.mark.integration

BROKER = {"log.cleaner.backoff.ms": "100", "log.cleaner.dedupe.buffer.size": str(16 << 20)}


@pytest.fixture(scope="module")
def broker(shared_zookeeper: ZooKeeperServer, tmp_path_factory: pytest.TempPathFactory,
           request: pytest.FixtureRequest) -> Iterator[BrokerProcess]:
    process = BrokerProcess(shared_zookeeper.connect_string_with_chroot(f"cleaner-{uuid.uuid4().hex[:12]}"), 0,
                            tmp_path_factory.mktemp("cleaner-broker"), BROKER)
    process.start()
    try:
        yield process
    finally:
        process.stop()
        if request.session.testsfailed:
            print(f"--- broker log ({process.log_path}) ---\n{process.log_tail(200)}")


def _cleaned_past(broker: BrokerProcess, topic: str, offset: int, timeout: float = 60.0) -> None:
    wait_for(lambda: cleaner_checkpoint(broker.log_dir, topic) >= offset, f"{topic} cleaned past {offset}", timeout)


def test_key_updates_in_every_codec_read_back_with_each_keys_latest_value(broker: BrokerProcess) -> None:
    topic = unique("compacted")
    broker.create_topic(topic, configs=COMPACTED)
    workload = Workload()
    for i, codec in enumerate(CODECS):
        produce_key_updates(broker.bootstrap, topic, workload, keys=150, rounds=4, codec=codec,
                            tombstone_every=7 if codec == "zstd" else 0, idempotent=i % 2 == 0)
    # one more round in a separate key space so that the last updates above leave the active segment
    produce_key_updates(broker.bootstrap, topic, Workload(), keys=200, rounds=1, codec="none", prefix="tail")
    _cleaned_past(broker, topic, workload.produced // 2)
    back = read_from_start(broker.bootstrap, topic)
    assert {k: v for k, v in back.latest.items() if k.startswith(b"key-")} == workload.latest
    assert {k: back.headers[k] for k in workload.latest} == workload.headers
    assert len(back.offsets) < workload.produced // 2  # compacted: most old updates are gone
    assert back.offsets == sorted(set(back.offsets)) and back.offsets[-1] == workload.produced + 199


def test_tombstones_vanish_after_delete_retention_ms(broker: BrokerProcess) -> None:
    topic = unique("tombstones")
    broker.create_topic(topic, configs={**COMPACTED, "delete.retention.ms": "1000", "segment.bytes": "4096"})
    workload = Workload()
    produce_key_updates(broker.bootstrap, topic, workload, keys=40, rounds=3, codec="lz4", tombstone_every=4)
    deleted = {k for k, v in workload.latest.items() if v is None}
    assert len(deleted) == 10
    filler = Workload()

    def tombstones_gone() -> bool:
        produce_key_updates(broker.bootstrap, topic, filler, keys=30, rounds=1, codec="none", prefix="filler")
        back = read_from_start(broker.bootstrap, topic)
        return not deleted & back.latest.keys() and cleaner_checkpoint(broker.log_dir, topic) > 0

    wait_for(tombstones_gone, "the tombstones to be cleaned away", 90, interval=0.5)
    back = read_from_start(broker.bootstrap, topic)
    assert {k: v for k, v in back.latest.items() if k.startswith(b"key-")} == \
        {k: v for k, v in workload.latest.items() if v is not None}


def test_group_whose_committed_offset_was_cleaned_away_keeps_consuming(broker: BrokerProcess) -> None:
    from confluent_kafka import Consumer, TopicPartition

    topic, group = unique("groups"), unique("group")
    broker.create_topic(topic, configs={**COMPACTED, "segment.bytes": "2048"})
    workload = Workload()
    produce_key_updates(broker.bootstrap, topic, workload, keys=10, rounds=10, codec="none")  # offsets 0..99
    committer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        committer.commit(offsets=[TopicPartition(topic, 0, 15)], asynchronous=False)
    finally:
        committer.close()
    produce_key_updates(broker.bootstrap, topic, Workload(), keys=50, rounds=1, codec="none", prefix="after")
    _cleaned_past(broker, topic, 90)
    remaining = [o for o in read_from_start(broker.bootstrap, topic).offsets if o >= 15]
    assert 15 not in remaining and len(remaining) < 100 + 50 - 15
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group, "enable.auto.commit": False,
                         "auto.offset.reset": "error", "session.timeout.ms": 6000})
    try:
        consumer.subscribe([topic])
        got: list[int] = []
        deadline = time.monotonic() + 60
        while (not got or got[-1] < 149) and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None:
                assert message.error() is None, message.error()
                got.append(message.offset())
        assert got == remaining  # from the first record after the cleaned-away offset to the end
        consumer.commit(asynchronous=False)
        assert consumer.committed([TopicPartition(topic, 0)], timeout=10)[0].offset == 150
    finally:
        consumer.close()


def test_a_keyless_record_on_a_compacted_topic_is_refused_and_stores_nothing(broker: BrokerProcess) -> None:
    from confluent_kafka import KafkaError, Producer, TopicPartition
    from confluent_kafka import Consumer

    topic = unique("keyless")
    broker.create_topic(topic, configs=COMPACTED)
    producer = Producer({"bootstrap.servers": broker.bootstrap, "retries": 0})
    outcomes: list[object] = []
    producer.produce(topic, value=b"no key", partition=0, on_delivery=lambda err, _m: outcomes.append(err))
    producer.flush(30)
    assert len(outcomes) == 1 and outcomes[0] is not None and outcomes[0].code() == KafkaError.INVALID_RECORD
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": unique("w")})
    try:
        assert consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10) == (0, 0)
    finally:
        consumer.close()


def _alter(broker: BrokerProcess, resource_type: int, name: str, configs: dict[str, str]) -> tuple[int, str | None]:
    resource = IncrementalAlterConfigsRequest.AlterConfigsResource(
        resource_type=resource_type, resource_name=name,
        configs=[IncrementalAlterConfigsRequest.AlterableConfig(name=k, config_operation=0, value=v)
                 for k, v in configs.items()])
    response = broker.request(ApiKey.INCREMENTAL_ALTER_CONFIGS, 1,
                              IncrementalAlterConfigsRequest(resources=[resource], validate_only=False))
    result = response.responses[0]
    return result.error_code, result.error_message


def test_invalid_cleaner_configs_are_refused_and_valid_ones_take_effect_at_run_time(broker: BrokerProcess) -> None:
    broker_resource, topic_resource = 4, 2
    refused = [
        ({"log.cleaner.threads": "3"}, "Log cleaner threads cannot be increased to more than double the current value 1"),
        ({"log.cleaner.threads": "0"}, "Log cleaner threads should be at least 1"),
        ({"log.cleaner.min.cleanable.ratio": "1.5"}, "log.cleaner.min.cleanable.ratio"),
        ({"log.cleaner.backoff.ms": "-1"}, "log.cleaner.backoff.ms"),
    ]
    for configs, message in refused:
        error, text = _alter(broker, broker_resource, "0", configs)
        assert error == Errors.INVALID_REQUEST and message in (text or ""), (configs, text)
    topic = unique("configs")
    broker.create_topic(topic, configs=COMPACTED)
    for configs, expected in [
        ({"min.cleanable.dirty.ratio": "2"}, Errors.INVALID_REQUEST),  # ConfigDef range: ConfigException
        ({"delete.retention.ms": "-5"}, Errors.INVALID_REQUEST),
        ({"min.compaction.lag.ms": "10", "max.compaction.lag.ms": "5"}, Errors.INVALID_CONFIG),  # LogConfig.validate
    ]:
        error, text = _alter(broker, topic_resource, topic, configs)
        assert error == expected, (configs, error, text)
    assert _alter(broker, broker_resource, "0", {"log.cleaner.threads": "2"}) == (Errors.NONE, None)
    wait_for(lambda: broker.log_path.read_text().count("Starting the log cleaner") >= 2,
             "the cleaner restarted with two threads", 30)
    workload = Workload()
    produce_key_updates(broker.bootstrap, topic, workload, keys=100, rounds=5, codec="snappy")
    produce_key_updates(broker.bootstrap, topic, Workload(), keys=100, rounds=1, codec="none", prefix="tail")
    _cleaned_past(broker, topic, 400)
    assert {k: v for k, v in read_from_start(broker.bootstrap, topic).latest.items()
            if k.startswith(b"key-")} == workload.latest
    assert _alter(broker, broker_resource, "0", {"log.cleaner.threads": "1"}) == (Errors.NONE, None)


def test_consumer_offsets_is_compacted_and_groups_load_back_from_the_cleaned_log(zk_connect: str,
                                                                                  tmp_path: Path) -> None:
    broker = BrokerProcess(zk_connect, 0, tmp_path, {**BROKER, "offsets.topic.num.partitions": "1",
                                                     "offsets.topic.segment.bytes": "2048"})
    try:
        broker.start()
        _commits_survive_cleaning_and_restart(broker)
    finally:
        broker.stop()


def _commits_survive_cleaning_and_restart(broker: BrokerProcess) -> None:
    from confluent_kafka import Consumer, TopicPartition

    topic, group = unique("committed"), unique("group")
    broker.create_topic(topic, configs=COMPACTED)
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        for offset in range(1, 120):
            consumer.commit(offsets=[TopicPartition(topic, 0, offset)], asynchronous=False)
    finally:
        consumer.close()
    wait_for(lambda: cleaner_checkpoint(broker.log_dir, "__consumer_offsets") > 60, "__consumer_offsets cleaned", 60)
    broker.stop()
    broker.start()
    reader = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        committed = wait_for(lambda: reader.committed([TopicPartition(topic, 0)], timeout=10)[0].offset == 119,
                             "the group's offset loaded from the cleaned log", 60)
        assert committed
    finally:
        reader.close()
