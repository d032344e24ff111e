"""Share consumers on a broker with fewer request handler workers than share-partitions being
started at once: ShareFetch waits for the share-group state RPCs, which this same broker's
handler pool serves, so it must not hold a worker while it waits."""

from __future__ import annotations

import pytest

from tests.harness.broker import BrokerProcess
from tests.integration.groups.group_helpers import unique
from tests.integration.share.share_helpers import STATE_TOPIC, drain, produce, share_consumer, warm_up

PARTITIONS = 4


@pytest.mark.parametrize("broker", [{"num.io.threads": "1", "offsets.topic.num.partitions": "1", **STATE_TOPIC}],
                         indirect=True)
def test_share_consumers_on_a_broker_with_one_request_handler(broker: BrokerProcess) -> None:
    """One worker and four consumers of four share-partitions: before, the first ShareFetch held
    the only worker while it waited for ReadShareGroupState from this broker, which then had no
    worker to answer it, and no record arrived until the persister gave up."""
    topic, group = unique("share-pool"), unique("g")
    broker.create_topic(topic, PARTITIONS)
    consumers = [share_consumer(broker, group) for _ in range(PARTITIONS)]
    try:
        for consumer in consumers:
            consumer.subscribe([topic])
        warm_up(broker, topic, consumers[0], partitions=PARTITIONS, timeout=30, others=tuple(consumers[1:]))
        expected = {b"p%d-%d" % (p, i) for p in range(PARTITIONS) for i in range(25)}
        for p in range(PARTITIONS):
            produce(broker, topic, sorted(v for v in expected if v.startswith(b"p%d-" % p)), partition=p)
        got = drain(consumers, len(expected), timeout=30)
        assert {m.value() for messages in got.values() for m in messages} == expected
    finally:
        for consumer in consumers:
            consumer.close()
