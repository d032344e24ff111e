"""KafkaZkClient against a real ZooKeeper: chroot, registration, cluster id, election, watches,
session expiry and ZooKeeper outages."""
from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest
from kazoo.client import KazooClient
from kazoo.exceptions import NodeExistsError

from coordination.broker_registration import BrokerRegistration, check_cluster_id, get_or_create_cluster_id
from coordination.errors import (
    BrokerIdInUseError,
    ControllerMovedError,
    InconsistentClusterIdError,
    MalformedZnodeError,
    ZooKeeperUnavailableError,
)
from coordination.kafka_zk_client import KafkaZkClient
from coordination.model import (
    BrokerEndPoint,
    BrokerInfo,
    LeaderAndIsr,
    ReplicaAssignment,
    SecurityProtocol,
    TopicAssignment,
    TopicPartition,
)
from coordination.zk_data import PERSISTENT_PATHS, encode_broker_info
from tests.harness.waiting import wait_for
from tests.harness.zookeeper import ZooKeeperServer, expire_session


def broker_info(broker_id: int, rack: str | None = None) -> BrokerInfo:
    return BrokerInfo(
        broker_id,
        (BrokerEndPoint("PLAINTEXT", "localhost", 9000 + broker_id, SecurityProtocol.PLAINTEXT),),
        rack=rack,
        timestamp_ms=1718446835000,
    )


@pytest.fixture
def clients(zk_connect: str) -> Iterator[Callable[..., KafkaZkClient]]:
    opened: list[KafkaZkClient] = []

    def open_client(connect: str = zk_connect, **kwargs: int) -> KafkaZkClient:
        kwargs.setdefault("session_timeout_ms", 4000)
        client = KafkaZkClient.connect(connect, **kwargs)
        opened.append(client)
        return client

    yield open_client
    for client in opened:
        client.close()


def raw_client(connect: str) -> KazooClient:
    client = KazooClient(connect)
    client.start(5)
    return client


def test_chroot_is_created_and_top_level_paths_exist(clients: Callable[..., KafkaZkClient], zk_connect: str) -> None:
    client = clients()
    client.create_top_level_paths()
    hosts, chroot = zk_connect.split("/", 1)
    raw = raw_client(hosts)
    try:
        for path in PERSISTENT_PATHS:
            assert raw.exists(f"/{chroot}{path}") is not None, path
    finally:
        raw.stop()


def test_broker_registration_znode_and_duplicate_id(clients: Callable[..., KafkaZkClient], zk_connect: str) -> None:
    first, second = clients(), clients()
    first.create_top_level_paths()
    info = broker_info(1, rack="rack-a")
    epoch = first.register_broker(info)
    raw = raw_client(zk_connect)
    try:
        data, stat = raw.get("/brokers/ids/1")
        assert data == encode_broker_info(info)
        assert stat.ephemeralOwner == first.zk.session_id
        assert stat.czxid == epoch
    finally:
        raw.stop()
    with pytest.raises(BrokerIdInUseError, match="broker id 1 is already registered"):
        second.register_broker(info)
    assert first.register_broker(info) == epoch  # same session: takes its own node over
    assert first.get_broker_info(1) == info.with_epoch(epoch)
    assert first.get_all_brokers() == {1: info.with_epoch(epoch)}


def test_cluster_id_created_once_and_checked(clients: Callable[..., KafkaZkClient]) -> None:
    first, second = clients(), clients()
    cluster_id = get_or_create_cluster_id(first)
    assert len(cluster_id) == 22
    assert get_or_create_cluster_id(second) == cluster_id
    check_cluster_id(cluster_id, {"/data/a": cluster_id, "/data/b": None})
    with pytest.raises(InconsistentClusterIdError, match="doesn't match stored clusterId"):
        check_cluster_id(cluster_id, {"/data/a": "someOtherClusterId0000"})


def test_controller_election_increments_epoch_and_fences(clients: Callable[..., KafkaZkClient]) -> None:
    first, second = clients(), clients()
    assert first.register_controller_and_increment_epoch(1) == (1, 1)
    with pytest.raises(ControllerMovedError):
        second.register_controller_and_increment_epoch(2)
    assert second.get_controller_id() == 1
    assert second.get_controller_epoch() == (1, 1)
    first.close()
    wait_for(lambda: second.get_controller_id() is None, what="/controller to vanish")
    epoch, zk_version = second.register_controller_and_increment_epoch(2)
    assert (epoch, zk_version) == (2, 2)


def test_broker_id_generation_uses_seqid_version(clients: Callable[..., KafkaZkClient]) -> None:
    client = clients()
    client.create_top_level_paths()
    assert [client.generate_broker_id() for _ in range(3)] == [1001, 1002, 1003]


def test_watches_fire_on_creation_change_and_children(clients: Callable[..., KafkaZkClient]) -> None:
    client, writer = clients(), clients()
    client.create_top_level_paths()
    seen: list[str] = []
    client.zk.register_znode_handler("/controller", seen.append)
    client.zk.register_child_handler("/brokers/ids", seen.append)
    assert client.get_controller_id(watch=True) is None
    assert client.get_broker_ids(watch=True) == []
    writer.register_controller_and_increment_epoch(7)
    writer.register_broker(broker_info(7))
    wait_for(lambda: sorted(seen) == ["/brokers/ids", "/controller"], what="both watches")


def test_session_expiry_reregisters_broker(zookeeper: ZooKeeperServer) -> None:
    client = KafkaZkClient.connect(zookeeper.connect_string, session_timeout_ms=4000)
    try:
        client.create_top_level_paths()
        epochs: list[int] = []
        registration = BrokerRegistration(client, broker_info(3), on_epoch_change=epochs.append)
        registration.register()
        expire_session(zookeeper.connect_string, client.zk.session_id, client.zk.session_password)
        wait_for(lambda: len(epochs) == 2, what="re-registration after session expiry")
        assert epochs[1] > epochs[0]
        info = client.get_broker_info(3)
        assert info is not None and info.epoch == epochs[1]
    finally:
        client.close()


def test_zookeeper_down_fails_clearly_and_recovers(zookeeper: ZooKeeperServer) -> None:
    client = KafkaZkClient.connect(zookeeper.connect_string, session_timeout_ms=10000, connection_timeout_ms=1000)
    try:
        client.create_top_level_paths()
        zookeeper.stop()
        with pytest.raises(ZooKeeperUnavailableError, match="unavailable"):
            client.get_all_topics()
        zookeeper.start()
        wait_for(lambda: client.zk.connected, what="reconnect")
        assert client.get_all_topics() == set()
    finally:
        client.close()


def test_connection_timeout_when_no_server(tmp_path: object) -> None:
    from tests.harness.ports import free_port

    with pytest.raises(ZooKeeperUnavailableError, match="timed out"):
        KafkaZkClient.connect(f"127.0.0.1:{free_port()}", session_timeout_ms=2000, connection_timeout_ms=500)


def test_partition_states_are_written_and_read_in_pipelines(clients: Callable[..., KafkaZkClient]) -> None:
    """create_partition_states, update_leader_and_isr and get_partition_states send their requests
    pipelined (at most zookeeper.max.in.flight.requests outstanding, here 3 for 25 partitions):
    each partition still gets its own outcome, a lost zkVersion race its retry, and a deposed
    controller's writes fail as a whole."""
    controller = clients(max_in_flight_requests=3)
    epoch, epoch_zk_version = controller.register_controller_and_increment_epoch(1)
    partitions = [TopicPartition("pipelined", p) for p in range(25)]
    created = controller.create_partition_states(
        {tp: LeaderAndIsr(leader=1, leader_epoch=0, isr=(1,)) for tp in partitions}, epoch, epoch_zk_version)
    assert created == {tp: LeaderAndIsr(leader=1, leader_epoch=0, isr=(1,), partition_epoch=0) for tp in partitions}
    again = controller.create_partition_states({partitions[0]: LeaderAndIsr(leader=1, leader_epoch=0, isr=(1,))},
                                               epoch, epoch_zk_version)
    assert isinstance(again[partitions[0]], NodeExistsError)

    stale = {tp: LeaderAndIsr(leader=1, leader_epoch=1, isr=(1,), partition_epoch=0 if tp.partition % 2 else 7)
             for tp in partitions}
    result = controller.update_leader_and_isr(stale, epoch, epoch_zk_version)
    assert sorted(result.to_retry) == [tp for tp in partitions if tp.partition % 2 == 0]
    assert result.finished == {tp: LeaderAndIsr(leader=1, leader_epoch=1, isr=(1,), partition_epoch=1)
                               for tp in partitions if tp.partition % 2}

    missing = TopicPartition("pipelined", 99)
    states = controller.get_partition_states([*partitions, missing])
    assert sorted(states) == partitions
    assert states[partitions[1]].leader_and_isr.leader_epoch == 1
    assert states[partitions[0]].leader_and_isr.leader_epoch == 0

    with pytest.raises(ControllerMovedError):
        controller.update_leader_and_isr(stale, epoch, epoch_zk_version + 1)


def test_topic_assignments_are_read_in_one_pipeline(clients: Callable[..., KafkaZkClient]) -> None:
    """The controller's start reads every topic's assignment at once: each topic gets its own
    answer, None for a topic that is gone, the decoding error for a znode that cannot be read."""
    client = clients(max_in_flight_requests=2)
    for name in ("a", "b", "c"):
        client.create_topic_assignment(name, TopicAssignment(f"id-{name}", {0: ReplicaAssignment((1,))}))
    client.zk.create_recursive("/brokers/topics/broken", b"not json")
    found = client.get_topic_assignments(["a", "missing", "b", "broken", "c"], watch=True)
    assert list(found) == ["a", "missing", "b", "broken", "c"]
    assert [found[t].topic_id for t in ("a", "b", "c")] == ["id-a", "id-b", "id-c"]  # type: ignore[union-attr]
    assert found["missing"] is None
    assert isinstance(found["broken"], MalformedZnodeError)
