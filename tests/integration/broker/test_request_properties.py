"""Every request that decodes gets a well-formed answer, at every API and version the broker serves.

Random valid requests (hypothesis strategies generated from the bundled schemas) go to one real
broker over one connection per API version. Each must be answered with a response of its API and
version that decodes completely and carries its correlation id, on a connection that stays open;
the only closes allowed are Kafka's: for an acks=0 produce that failed, and for every Envelope (a
ZooKeeper-mode Kafka without forwarding advertises it and closes; tested in test_fencing.py). The broker must log no
traceback while answering, and still serve a fresh client at the end.

Strings and records are biased towards names and batches that exist, so the probes reach the
handlers' real paths and not only their "unknown topic" answers; waits (timeouts, long polls,
rebalances) and new topics' partition counts are capped so that a well-behaved broker answers each
probe quickly.
"""
from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from broker.admin.topic_validation import MAX_PARTITIONS
from broker.handlers import load_all
from broker.kafka_apis import RegisteredApiVersionManager
from protocol.api_keys import ApiKey
from protocol.messages import ApiVersionsRequest, Message
from protocol.records.builder import RecordBatchBuilder
from protocol.records.compression import CompressionType
from protocol.schema import FieldSpec
from tests.harness.broker import BrokerConnection, BrokerProcess
from tests.unit.protocol.message_strategies import MessageStrategies

pytestmark = pytest.mark.integration

# Probes that pose as the controller or delete topics change what later probes find: they go last.
DISRUPTIVE = {ApiKey.LEADER_AND_ISR, ApiKey.STOP_REPLICA, ApiKey.UPDATE_METADATA, ApiKey.CONTROLLED_SHUTDOWN,
              ApiKey.ALTER_PARTITION, ApiKey.ALLOCATE_PRODUCER_IDS, ApiKey.DELETE_TOPICS}
load_all()
SERVED = sorted(((key, version) for key, lo, hi in RegisteredApiVersionManager().enabled_apis()
                 for version in range(lo, hi + 1) if key != ApiKey.ENVELOPE),
                key=lambda served: (served[0] in DISRUPTIVE, served))
EXAMPLES_PER_VERSION = int(os.environ.get("PROBE_EXAMPLES", "4"))  # more to search harder by hand
MAX_WAIT_MS = 200  # cap for every timeout and long poll in a probe
MAX_NEW_PARTITIONS = 8  # cap for the partitions of a topic a probe creates
TOPIC, COMPACTED, GROUP = "probe", "probe-compact", "probe-group"
NAMES = [TOPIC, COMPACTED, GROUP, "", "probe-member", "consumer", "range"]


def _batch(codec: int, keys: list[bytes | None]) -> bytes:
    builder = RecordBatchBuilder(magic=2, compression=codec)
    for i, key in enumerate(keys):
        builder.append(1_700_000_000_000 + i, key, b"value-%d" % i)
    return bytes(builder.build())


BATCHES = [_batch(CompressionType.NONE, [b"k1", b"k2"]), _batch(CompressionType.GZIP, [b"k", None, b"k"]),
           _batch(CompressionType.LZ4, [None]), _batch(CompressionType.ZSTD, [b"z"])]


class ProbeStrategies(MessageStrategies):
    """Strings are often the probe's topic and group names; records often real batches."""

    def scalar(self, f: FieldSpec) -> st.SearchStrategy[Any]:
        if f.element_type == "string":
            return st.one_of(st.sampled_from(NAMES), super().scalar(f))
        if f.element_type == "records":
            return st.one_of(st.sampled_from(BATCHES), super().scalar(f))
        if f.element_type == "int32" and f.attr in ("partition_index", "index", "partition", "partitions"):
            return st.one_of(st.integers(-1, 2), super().scalar(f))
        return super().scalar(f)


def _cap(message: Message) -> None:
    """Bound every wait the request asks for (long polls, request timeouts, rebalances) and the size of
    topics it may create (a topic of thousands of partitions is legal, just slow to make and elect);
    counts beyond what ZooKeeper can hold stay, the broker must refuse them at once."""
    for attr in message._fields:
        value = getattr(message, attr)
        if isinstance(value, Message):
            _cap(value)
        elif isinstance(value, list):
            for item in value:
                if isinstance(item, Message):
                    _cap(item)
        elif isinstance(value, bool) or not isinstance(value, int):
            continue
        elif value > MAX_WAIT_MS and (attr.endswith("timeout_ms") or attr == "max_wait_ms"):
            setattr(message, attr, value % MAX_WAIT_MS)
        elif MAX_NEW_PARTITIONS < value <= MAX_PARTITIONS and attr in ("num_partitions", "count"):
            setattr(message, attr, value % MAX_NEW_PARTITIONS)


class Probe:
    """A connection to the broker, reopened when the broker closes it, and the broker's new log lines."""

    def __init__(self, broker: BrokerProcess) -> None:
        self.broker = broker
        self.connection: BrokerConnection | None = None
        self.log_position = broker.log_path.stat().st_size

    def close(self) -> None:
        if self.connection is not None:
            self.connection.close()
            self.connection = None

    def exchange(self, api_key: int, version: int, body: Message, expect_response: bool = True) -> Any:
        """Send one request; its response, or None when none is expected."""
        if self.connection is None:
            self.connection = self.broker.connect("probe")
        if not expect_response:
            self.connection.send(api_key, version, body)
            return None
        return self.connection.request(api_key, version, body)

    def new_log(self) -> str:
        with open(self.broker.log_path, "rb") as log:
            log.seek(self.log_position)
            data = log.read()
        self.log_position += len(data)
        return data.decode(errors="replace")


# With the metrics endpoint on (a free port), so every response also goes through the request metrics.
BROKER_OVERRIDES = {"group.min.session.timeout.ms": "10", "group.max.session.timeout.ms": str(MAX_WAIT_MS),
                    "offsets.topic.num.partitions": "2", "metrics.prometheus.listener": "http://127.0.0.1:0"}


@pytest.fixture(scope="module")
def probe(module_broker: BrokerProcess) -> Iterator[Probe]:
    module_broker.create_topic(TOPIC, 2)
    module_broker.create_topic(COMPACTED, 1, configs={"cleanup.policy": "compact"})
    opened = Probe(module_broker)
    try:
        yield opened
    finally:
        opened.close()


def _strategy(api_key: ApiKey, version: int) -> st.SearchStrategy[Any]:
    from protocol.api_keys import request_class

    return ProbeStrategies(request_class(api_key)._spec.name, version).message()


@pytest.mark.parametrize(("api_key", "version"), SERVED, ids=[f"{k.name}-v{v}" for k, v in SERVED])
@settings(max_examples=EXAMPLES_PER_VERSION, deadline=None, database=None,
          suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_every_decodable_request_gets_a_well_formed_response(probe: Probe, api_key: ApiKey, version: int,
                                                             data: st.DataObject) -> None:
    body = data.draw(_strategy(api_key, version))
    _cap(body)
    acks_zero = api_key == ApiKey.PRODUCE and body.acks == 0
    try:
        response = probe.exchange(api_key, version, body, expect_response=not acks_zero)
        if acks_zero:  # no answer; the connection is closed only if the produce failed
            try:
                probe.exchange(ApiKey.API_VERSIONS, 3, ApiVersionsRequest(
                    client_software_name="probe", client_software_version="1"))
            except ConnectionError:
                probe.close()
        else:
            assert response is not None
    except (ConnectionError, OSError) as exc:
        probe.close()
        pytest.fail(f"{api_key.name} v{version}: no response ({exc}) to {body!r}\n{probe.new_log()[-3000:]}")
    log = probe.new_log()
    assert "Traceback" not in log, f"{api_key.name} v{version} {body!r}:\n{log[-5000:]}"


def test_the_broker_still_serves_new_clients(module_broker: BrokerProcess) -> None:
    """(Its metadata may be anything now: probes may pose as the controller, as they could with Kafka.)"""
    response = module_broker.request(ApiKey.API_VERSIONS, 3, ApiVersionsRequest(
        client_software_name="probe", client_software_version="1"))
    assert response.error_code == 0 and response.api_keys
