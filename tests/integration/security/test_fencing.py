"""Fencing and authorization of inter-broker, controller and admin requests, side by side with
Kafka 3.9: the same raw request to our broker and to Kafka's, the same answer (docs/fencing.md has
the table these tests follow row by row).

Each broker is its own one-broker cluster with the AclAuthorizer: ``admin`` is a super user, ``bob``
may only DESCRIBE the topic ``open``. The topic ``pair`` is assigned to brokers 0 and 1 (1 never
runs), so broker 1 is a follower that exists only in the assignment.
"""
from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from coordination.model import ReplicaAssignment, TopicAssignment, random_uuid_b64
from protocol.api_keys import ApiKey
from protocol.errors import Errors
from protocol.messages import (
    AddPartitionsToTxnRequest,
    AllocateProducerIdsRequest,
    AlterPartitionReassignmentsRequest,
    AlterPartitionRequest,
    ApiVersionsRequest,
    ControlledShutdownRequest,
    CreateAclsRequest,
    DeleteTopicsRequest,
    DescribeUserScramCredentialsRequest,
    DescribeUserScramCredentialsResponse,
    EnvelopeRequest,
    FetchRequest,
    LeaderAndIsrRequest,
    ListOffsetsRequest,
    MetadataRequest,
    OffsetForLeaderEpochRequest,
    SaslHandshakeRequest,
    StopReplicaRequest,
    UpdateFeaturesRequest,
    UpdateMetadataRequest,
    WriteTxnMarkersRequest,
)
from protocol.schema import ZERO_UUID
from tests.harness.kafka_cli import kafka_cli
from tests.harness.waiting import wait_for
from tests.integration.security.fencing_pair import FencingBroker, RawClient, started_pair

pytestmark = pytest.mark.integration

ACL_TOPIC, ACL_LITERAL, ACL_DESCRIBE, ACL_ALLOW = 2, 3, 8, 3


@pytest.fixture(scope="module")
def pair(shared_zookeeper, tmp_path_factory) -> Iterator[list[FencingBroker]]:
    with started_pair(shared_zookeeper, tmp_path_factory.mktemp("fencing")) as brokers:
        for b in brokers:
            b.broker.create_topic("open")
            b.broker.create_topic("secret")
            assign_to_brokers_0_and_1(b, "pair")
            created = b.ask("admin", ApiKey.CREATE_ACLS, 3, CreateAclsRequest(creations=[CreateAclsRequest.AclCreation(
                resource_type=ACL_TOPIC, resource_name="open", resource_pattern_type=ACL_LITERAL,
                principal="User:bob", host="*", operation=ACL_DESCRIBE, permission_type=ACL_ALLOW)]))
            assert [r.error_code for r in created.results] == [0]
        yield brokers


def assign_to_brokers_0_and_1(b: FencingBroker, topic: str) -> None:
    """A topic of one partition on brokers 0 and 1, written to ZooKeeper as is (broker 1 never runs)."""
    zk_value(b, lambda zk: zk.create_topic_assignment(topic, TopicAssignment(
        random_uuid_b64(), {0: ReplicaAssignment((0, 1))})))
    b.broker.wait_for_leaders(topic, 1)


def same(pair: list[FencingBroker], user: str, api_key: int, version: int,
         body: Callable[[FencingBroker], Any], view: Callable[[Any], Any] = lambda r: r) -> Any:
    """``view`` of both brokers' answers to the request ``body`` builds for each; they must agree."""
    ours, kafka = (view(b.ask(user, api_key, version, body(b))) for b in pair)
    assert ours == kafka
    return ours


def topic_id(b: FencingBroker, topic: str) -> uuid.UUID:
    return b.broker.metadata([topic]).topics[0].topic_id


def zk_value(b: FencingBroker, read: Callable[[Any], Any]) -> Any:
    zk = b.zk()
    try:
        return read(zk)
    finally:
        zk.close()


def broker_epoch(b: FencingBroker) -> int:
    return zk_value(b, lambda zk: zk.get_broker_info(0).epoch)


def controller_epoch(b: FencingBroker) -> int:
    return zk_value(b, lambda zk: zk.get_controller_epoch()[0])


# --- topics asked for by id -----------------------------------------------------------------------

def test_metadata_by_id_hides_the_name_of_a_topic_the_user_may_not_describe(pair) -> None:
    def by_id(topic: str) -> Callable[[FencingBroker], Any]:
        return lambda b: MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(topic_id=topic_id(b, topic))],
                                         allow_auto_topic_creation=False)

    def view(r: Any) -> list[tuple[int, str | None, bool, int]]:
        return [(t.error_code, t.name, t.is_internal, len(t.partitions)) for t in r.topics]

    assert same(pair, "bob", ApiKey.METADATA, 12, by_id("secret"), view) == [
        (Errors.TOPIC_AUTHORIZATION_FAILED, None, False, 0)]
    assert same(pair, "bob", ApiKey.METADATA, 12, by_id("open"), view) == [(0, "open", False, 1)]
    by_name = MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name="secret")],
                              allow_auto_topic_creation=False)
    assert same(pair, "bob", ApiKey.METADATA, 12, lambda b: by_name,
                lambda r: [(t.error_code, t.name, t.topic_id) for t in r.topics]) == [
        (Errors.TOPIC_AUTHORIZATION_FAILED, "secret", ZERO_UUID)]


def test_delete_topics_by_id_without_describe_or_delete_is_an_authorization_failure(pair) -> None:
    def delete(topic: str) -> Callable[[FencingBroker], Any]:
        return lambda b: DeleteTopicsRequest(topics=[DeleteTopicsRequest.DeleteTopicState(topic_id=topic_id(b, topic))],
                                             timeout_ms=5000)

    def view(r: Any) -> list[tuple[str | None, int]]:
        return [(t.name, t.error_code) for t in r.responses]

    assert same(pair, "bob", ApiKey.DELETE_TOPICS, 6, delete("secret"), view) == [
        (None, Errors.TOPIC_AUTHORIZATION_FAILED)]  # no DESCRIBE: the name stays hidden
    assert same(pair, "bob", ApiKey.DELETE_TOPICS, 6, delete("open"), view) == [
        ("open", Errors.TOPIC_AUTHORIZATION_FAILED)]  # DESCRIBE without DELETE
    assert [sorted((t.name, t.error_code) for t in b.broker.metadata(["secret", "open"]).topics) for b in pair] == [
        [("open", 0), ("secret", 0)]] * 2  # nothing was deleted


# --- replica reads --------------------------------------------------------------------------------

def _fetch(version: int, replica_id: int, current_leader_epoch: int = -1,
           topic_name: str = "pair") -> Callable[[FencingBroker], Any]:
    def build(b: FencingBroker) -> Any:
        topic = FetchRequest.FetchTopic(topic=topic_name, topic_id=topic_id(b, topic_name), partitions=[
            FetchRequest.FetchPartition(partition=0, fetch_offset=0, partition_max_bytes=1000,
                                        current_leader_epoch=current_leader_epoch, log_start_offset=-1)])
        replica = ({"replica_state": FetchRequest.ReplicaState(replica_id=replica_id, replica_epoch=-1)}
                   if version >= 15 else {"replica_id": replica_id})
        return FetchRequest(max_wait_ms=0, min_bytes=0, max_bytes=10000, isolation_level=0, session_id=0,
                            session_epoch=-1, topics=[topic], forgotten_topics_data=[], **replica)
    return build


def _partition_errors(r: Any) -> list[int]:
    return [p.error_code for t in r.responses for p in t.partitions]


@pytest.mark.parametrize("version", [12, 15])
def test_replica_fetches_are_served_to_the_partitions_followers_only(pair, version: int) -> None:
    # broker 1 follows; 0 is the leader itself; 5 is no replica of the partition
    answers = {replica: same(pair, "admin", ApiKey.FETCH, version, _fetch(version, replica), _partition_errors)
               for replica in (0, 1, 5)}
    assert answers == {0: [Errors.NOT_LEADER_OR_FOLLOWER], 1: [0], 5: [Errors.NOT_LEADER_OR_FOLLOWER]}
    # caught up, but no live broker: not proposed for the ISR (Kafka's ZK-mode isReplicaIsrEligible)
    assert "Proposing ISR [0, 1]" not in pair[0].broker.log_path.read_text()
    assert same(pair, "admin", ApiKey.FETCH, version, _fetch(version, 1, current_leader_epoch=3),
                _partition_errors) == [Errors.UNKNOWN_LEADER_EPOCH]
    assert same(pair, "bob", ApiKey.FETCH, version, _fetch(version, 1), _partition_errors) == [
        Errors.TOPIC_AUTHORIZATION_FAILED]  # a follower needs CLUSTER_ACTION


def test_a_replica_moved_away_and_an_older_leader_epoch_are_fenced(pair) -> None:
    """A reassignment from [0, 1] to [0] bumps the leader epoch: broker 1's fetches are refused from
    then on, and so is any request that still names the leader epoch before."""
    move = AlterPartitionReassignmentsRequest(timeout_ms=10000, topics=[
        AlterPartitionReassignmentsRequest.ReassignableTopic(name="moving", partitions=[
            AlterPartitionReassignmentsRequest.ReassignablePartition(partition_index=0, replicas=[0])])])
    for b in pair:
        assign_to_brokers_0_and_1(b, "moving")
        assert [p.error_code for t in b.ask("admin", ApiKey.ALTER_PARTITION_REASSIGNMENTS, 0, move).responses
                for p in t.partitions] == [0]
        wait_for(lambda: b.broker.metadata(["moving"]).topics[0].partitions[0].replica_nodes == [0],
                 f"{b.kind}: the reassignment to complete")
    assert same(pair, "admin", ApiKey.METADATA, 12, lambda b: MetadataRequest(
        topics=[MetadataRequest.MetadataRequestTopic(name="moving")], allow_auto_topic_creation=False),
        lambda r: [(p.leader_id, p.leader_epoch, p.replica_nodes, p.isr_nodes) for p in r.topics[0].partitions]
    ) == [(0, 1, [0], [0])]
    assert same(pair, "admin", ApiKey.FETCH, 12, _fetch(12, 1, topic_name="moving"), _partition_errors) == [
        Errors.NOT_LEADER_OR_FOLLOWER]
    assert same(pair, "admin", ApiKey.FETCH, 12, _fetch(12, -1, 0, "moving"), _partition_errors) == [
        Errors.FENCED_LEADER_EPOCH]
    assert same(pair, "admin", ApiKey.OFFSET_FOR_LEADER_EPOCH, 4, _offset_for_leader_epoch("moving", 1, 0),
                _epoch_end_offsets) == [(Errors.FENCED_LEADER_EPOCH, -1, -1)]
    # the controller's own requests are fenced by the leader epoch too (LeaderAndIsr with the
    # controller epoch's error, as Kafka answers)
    for leader_epoch in (0, 1):  # older, and the current one
        assert same(pair, "admin", ApiKey.LEADER_AND_ISR, 7, lambda b, e=leader_epoch: _leader_and_isr(
            controller_epoch(b), -1, "moving", e), _control_errors) == (0, [Errors.STALE_CONTROLLER_EPOCH])
    S = StopReplicaRequest
    assert same(pair, "admin", ApiKey.STOP_REPLICA, 4, lambda b: S(
        controller_id=0, controller_epoch=controller_epoch(b), broker_epoch=-1, topic_states=[
            S.StopReplicaTopicState(topic_name="moving", partition_states=[
                S.StopReplicaPartitionState(partition_index=0, leader_epoch=0, delete_partition=False)])]),
        _control_errors) == (0, [Errors.FENCED_LEADER_EPOCH])


def _offset_for_leader_epoch(topic: str, replica_id: int, current: int = -1) -> Callable[[FencingBroker], Any]:
    return lambda b: OffsetForLeaderEpochRequest(replica_id=replica_id, topics=[
        OffsetForLeaderEpochRequest.OffsetForLeaderTopic(topic=topic, partitions=[
            OffsetForLeaderEpochRequest.OffsetForLeaderPartition(
                partition=0, current_leader_epoch=current, leader_epoch=0)])])


def _epoch_end_offsets(r: Any) -> list[tuple[int, int, int]]:
    return [(p.error_code, p.leader_epoch, p.end_offset) for t in r.topics for p in t.partitions]


def test_offset_for_leader_epoch_needs_cluster_action_or_describe_and_the_current_epoch(pair) -> None:
    request, view = _offset_for_leader_epoch, _epoch_end_offsets
    denied = [(Errors.TOPIC_AUTHORIZATION_FAILED, -1, -1)]
    assert same(pair, "bob", ApiKey.OFFSET_FOR_LEADER_EPOCH, 4, request("open", 5), view) == [(0, 0, 0)]
    assert same(pair, "bob", ApiKey.OFFSET_FOR_LEADER_EPOCH, 4, request("pair", 1), view) == denied
    assert same(pair, "admin", ApiKey.OFFSET_FOR_LEADER_EPOCH, 4, request("pair", 5), view) == [(0, 0, 0)]
    assert same(pair, "admin", ApiKey.OFFSET_FOR_LEADER_EPOCH, 4, request("pair", 1, current=1), view) == [
        (Errors.UNKNOWN_LEADER_EPOCH, -1, -1)]


def test_list_offsets_from_a_replica_id_needs_describe_only(pair) -> None:
    request = ListOffsetsRequest(replica_id=1, topics=[ListOffsetsRequest.ListOffsetsTopic(name="pair", partitions=[
        ListOffsetsRequest.ListOffsetsPartition(partition_index=0, timestamp=-1, current_leader_epoch=-1)])])

    def view(r: Any) -> list[tuple[int, int]]:
        return [(p.error_code, p.offset) for t in r.topics for p in t.partitions]

    assert same(pair, "bob", ApiKey.LIST_OFFSETS, 5, lambda b: request, view) == [
        (Errors.TOPIC_AUTHORIZATION_FAILED, -1)]
    assert same(pair, "admin", ApiKey.LIST_OFFSETS, 5, lambda b: request, view) == [(0, 0)]


# --- the controller's requests to brokers -----------------------------------------------------------

def _leader_and_isr(controller_epoch: int, broker_epoch: int, topic: str = "open", leader_epoch: int = 0) -> Any:
    L = LeaderAndIsrRequest
    return L(controller_id=0, controller_epoch=controller_epoch, broker_epoch=broker_epoch, live_leaders=[],
             topic_states=[L.LeaderAndIsrTopicState(topic_name=topic, partition_states=[L.LeaderAndIsrPartitionState(
                 partition_index=0, controller_epoch=controller_epoch, leader=0, leader_epoch=leader_epoch, isr=[0],
                 replicas=[0])])])


def _controller_requests(controller_epoch: int, broker_epoch: int) -> dict[str, tuple[int, int, Any]]:
    S = StopReplicaRequest
    return {
        "LeaderAndIsr": (ApiKey.LEADER_AND_ISR, 7, _leader_and_isr(controller_epoch, broker_epoch)),
        "UpdateMetadata": (ApiKey.UPDATE_METADATA, 8, UpdateMetadataRequest(
            controller_id=0, controller_epoch=controller_epoch, broker_epoch=broker_epoch, topic_states=[],
            live_brokers=[])),
        "StopReplica": (ApiKey.STOP_REPLICA, 4, S(
            controller_id=0, controller_epoch=controller_epoch, broker_epoch=broker_epoch, topic_states=[
                S.StopReplicaTopicState(topic_name="open", partition_states=[
                    S.StopReplicaPartitionState(partition_index=0, leader_epoch=0, delete_partition=False)])])),
    }


def _control_errors(r: Any) -> tuple[int, list[int]]:
    if hasattr(r, "topics"):  # LeaderAndIsr v5+
        return r.error_code, [p.error_code for t in r.topics for p in t.partition_errors]
    return r.error_code, [p.error_code for p in getattr(r, "partition_errors", [])]


@pytest.mark.parametrize("name", ["LeaderAndIsr", "UpdateMetadata", "StopReplica"])
def test_controller_requests_are_fenced_by_broker_epoch_then_controller_epoch(pair, name: str) -> None:
    def answer(user: str, controller_epoch: int, broker_epoch: int) -> tuple[int, list[int]]:
        api_key, version, body = _controller_requests(controller_epoch, broker_epoch)[name]
        return same(pair, user, api_key, version, lambda b: body, _control_errors)

    lists_partitions = name == "LeaderAndIsr"
    stale_broker = answer("admin", 99, 1)  # older than the registration: nothing changes, not even the epoch
    assert stale_broker == (Errors.STALE_BROKER_EPOCH, [Errors.STALE_BROKER_EPOCH] * lists_partitions)
    stale_controller = answer("admin", 0, -1)  # -1: a controller from before KIP-380
    assert stale_controller == (Errors.STALE_CONTROLLER_EPOCH, [Errors.STALE_CONTROLLER_EPOCH] * lists_partitions)
    denied = answer("bob", 99, 1)
    assert denied == (Errors.CLUSTER_AUTHORIZATION_FAILED,
                      [Errors.CLUSTER_AUTHORIZATION_FAILED] * (name != "UpdateMetadata"))
    # the controller epoch each broker knows is still its controller's: an empty StopReplica at it passes
    empty = [(b, StopReplicaRequest(controller_id=0, controller_epoch=controller_epoch(b), broker_epoch=-1,
                                    topic_states=[])) for b in pair]
    assert [b.ask("admin", ApiKey.STOP_REPLICA, 4, body).error_code for b, body in empty] == [0, 0]


# --- brokers' requests to the controller ------------------------------------------------------------

def test_alter_partition_comes_only_from_a_live_broker_at_its_live_epoch(pair) -> None:
    def request(broker_id: int, epoch: Callable[[FencingBroker], int]) -> Callable[[FencingBroker], Any]:
        return lambda b: AlterPartitionRequest(broker_id=broker_id, broker_epoch=epoch(b), topics=[
            AlterPartitionRequest.TopicData(topic_name="open", partitions=[AlterPartitionRequest.PartitionData(
                partition_index=0, leader_epoch=0, new_isr=[0], partition_epoch=0)])])

    def view(r: Any) -> tuple[int, list[Any]]:
        return r.error_code, r.topics

    stale = (Errors.STALE_BROKER_EPOCH, [])
    assert same(pair, "admin", ApiKey.ALTER_PARTITION, 1, request(7, lambda b: -1), view) == stale
    assert same(pair, "admin", ApiKey.ALTER_PARTITION, 1, request(0, lambda b: -1), view) == stale
    assert same(pair, "admin", ApiKey.ALTER_PARTITION, 1, request(0, lambda b: broker_epoch(b) - 1), view) == stale
    assert same(pair, "admin", ApiKey.ALTER_PARTITION, 1, request(0, lambda b: broker_epoch(b) + 1), view) == stale
    assert same(pair, "bob", ApiKey.ALTER_PARTITION, 1, request(0, broker_epoch), view) == (
        Errors.CLUSTER_AUTHORIZATION_FAILED, [])


def test_allocate_producer_ids_comes_only_from_a_registered_broker_at_its_live_epoch(pair) -> None:
    def answer(user: str, broker_id: int, epoch: Callable[[FencingBroker], int]) -> tuple[int, int]:
        return same(pair, user, ApiKey.ALLOCATE_PRODUCER_IDS, 0,
                    lambda b: AllocateProducerIdsRequest(broker_id=broker_id, broker_epoch=epoch(b)),
                    lambda r: (r.error_code, r.producer_id_len))

    assert answer("admin", 7, lambda b: -1) == (Errors.BROKER_ID_NOT_REGISTERED, 0)
    assert answer("admin", 0, lambda b: -1) == (Errors.STALE_BROKER_EPOCH, 0)
    assert answer("admin", 0, lambda b: broker_epoch(b) - 1) == (Errors.STALE_BROKER_EPOCH, 0)
    assert answer("bob", 0, broker_epoch) == (Errors.CLUSTER_AUTHORIZATION_FAILED, 0)


def test_controlled_shutdown_is_fenced_by_an_older_broker_epoch(pair) -> None:
    def answer(user: str, broker_id: int, epoch: Callable[[FencingBroker], int]) -> Any:
        return [b.ask(user, ApiKey.CONTROLLED_SHUTDOWN, 3,
                      ControlledShutdownRequest(broker_id=broker_id, broker_epoch=epoch(b))) for b in pair]

    def errors(user: str, broker_id: int, epoch: Callable[[FencingBroker], int]) -> list[tuple[int, list[Any]]]:
        return [(r.error_code, r.remaining_partitions) for r in answer(user, broker_id, epoch)]

    assert errors("admin", 0, lambda b: broker_epoch(b) - 1) == [(Errors.STALE_BROKER_EPOCH, [])] * 2
    assert errors("bob", 0, broker_epoch) == [(Errors.CLUSTER_AUTHORIZATION_FAILED, [])] * 2
    assert errors("admin", 7, lambda b: -1) == [(Errors.BROKER_NOT_AVAILABLE, [])] * 2
    # an unknown broker with an epoch: Kafka 3.9 fails on its missing epoch (UNKNOWN_SERVER_ERROR);
    # ours says what is wrong, as it does with -1 (docs/fencing.md)
    assert errors("admin", 7, lambda b: 12345) == [(Errors.BROKER_NOT_AVAILABLE, []),
                                                   (Errors.UNKNOWN_SERVER_ERROR, [])]


# --- other inter-broker requests from an ordinary user -----------------------------------------------

def test_write_txn_markers_and_broker_add_partitions_need_cluster_action(pair) -> None:
    markers = WriteTxnMarkersRequest(markers=[WriteTxnMarkersRequest.WritableTxnMarker(
        producer_id=1, producer_epoch=0, transaction_result=True, coordinator_epoch=0, topics=[
            WriteTxnMarkersRequest.WritableTxnMarkerTopic(name="open", partition_indexes=[0])])])
    assert same(pair, "bob", ApiKey.WRITE_TXN_MARKERS, 1, lambda b: markers,
                lambda r: [p.error_code for m in r.markers for t in m.topics for p in t.partitions]) == [
        Errors.CLUSTER_AUTHORIZATION_FAILED]
    A = AddPartitionsToTxnRequest
    verify = A(transactions=[A.AddPartitionsToTxnTransaction(
        transactional_id="t", producer_id=1, producer_epoch=0, verify_only=True,
        topics=[A.AddPartitionsToTxnTopic(name="open", partitions=[0])])])
    assert same(pair, "bob", ApiKey.ADD_PARTITIONS_TO_TXN, 4, lambda b: verify,
                lambda r: (r.error_code, r.results_by_transaction)) == (Errors.CLUSTER_AUTHORIZATION_FAILED, [])


@pytest.mark.parametrize("user", ["bob", "admin"])
def test_envelope_without_forwarding_closes_the_connection(pair, user: str) -> None:
    for b in pair:
        client = RawClient(b.sasl, user)
        client.send(ApiKey.ENVELOPE, 0, EnvelopeRequest(request_data=b"", request_principal=None,
                                                         client_host_address=b"\x7f\x00\x00\x01"))
        assert client.closed_by_broker(), b.kind
        client.close()


def test_describe_user_scram_credentials_is_refused_once_per_user_and_for_every_user(pair) -> None:
    D = DescribeUserScramCredentialsRequest
    named = D(users=[D.UserName(name="alice"), D.UserName(name="bob")])
    assert same(pair, "bob", ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, 0, lambda b: named).results == [
        DescribeUserScramCredentialsResponse.DescribeUserScramCredentialsResult(
            user="", error_code=Errors.CLUSTER_AUTHORIZATION_FAILED, error_message=None, credential_infos=[])] * 2
    # Kafka 3.9 fails to build this refusal (a null user list) and never answers; ours answers it
    everyone = pair[0].ask("bob", ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, 0, D(users=None))
    assert (everyone.error_code, everyone.results) == (Errors.CLUSTER_AUTHORIZATION_FAILED, [])


# --- features -----------------------------------------------------------------------------------------

def _update(*updates: tuple[str, int, int]) -> UpdateFeaturesRequest:
    return UpdateFeaturesRequest(timeout_ms=5000, feature_updates=[
        UpdateFeaturesRequest.FeatureUpdateKey(feature=name, max_version_level=level, upgrade_type=kind)
        for name, level, kind in updates])


def test_update_features_answers_as_a_zookeeper_mode_kafka(pair) -> None:
    def view(r: Any) -> tuple[int, str | None, list[tuple[str, int, str | None]]]:
        return r.error_code, r.error_message, [(f.feature, f.error_code, f.error_message) for f in r.results]

    assert same(pair, "bob", ApiKey.UPDATE_FEATURES, 1, lambda b: _update(("foo", 2, 1)), view) == (
        Errors.CLUSTER_AUTHORIZATION_FAILED, "Cluster authorization failed.", [])
    updates = [("foo", 2, 1), ("foo", 0, 2), ("foo", -1, 1), ("", 1, 1), ("foo", 2, 9)]
    answers = [same(pair, "admin", ApiKey.UPDATE_FEATURES, 1, lambda b, u=u: _update(u), view) for u in updates]
    assert [results for _, _, results in answers] == [
        [("foo", Errors.INVALID_REQUEST,
          "Could not apply finalized feature update because the provided feature is not supported.")],
        [("foo", Errors.INVALID_REQUEST, "Can not delete non-existing finalized feature.")],
        [("foo", Errors.INVALID_REQUEST,
          "Can not provide versionLevel: -1 less than 1 without setting the SAFE downgradeType in the request.")],
        [("", Errors.INVALID_REQUEST, "Feature name can not be empty.")],
        [("foo", Errors.INVALID_REQUEST, "Received unknown upgrade type.")]]
    assert {(error, message) for error, message, _ in answers} == {(0, None)}
    versions = ApiVersionsRequest(client_software_name="fencing", client_software_version="1")
    # share.version is Kafka 4.2's feature of the share groups this broker serves (docs/share-groups.md):
    # the rest of the answer is Kafka 3.9's.
    assert same(pair, "admin", ApiKey.API_VERSIONS, 3, lambda b: versions,
                lambda r: (r.finalized_features_epoch, _without_share(r.finalized_features),
                           _without_share(r.supported_features),
                           [(a.min_version, a.max_version) for a in r.api_keys if a.api_key == ApiKey.UPDATE_FEATURES]
                           )) == (0, [], [], [(0, 1)])
    ours = next(b for b in pair if b.kind == "ours").broker.request(ApiKey.API_VERSIONS, 3, versions)
    assert [(f.name, f.max_version_level) for f in ours.finalized_features] == [(SHARE_VERSION, 1)]


SHARE_VERSION = "share.version"


def _without_share(features: list[Any]) -> list[Any]:
    return [f for f in features if f.name != SHARE_VERSION]


@pytest.mark.timeout(600)
def test_kafka_features_tool_gets_the_same_answers(pair, tmp_path) -> None:
    cli = kafka_cli(tmp_path / "cli")
    commands = [["describe"], ["upgrade", "--feature", "foo=2"], ["upgrade", "--metadata", "3.9"],
                ["downgrade", "--feature", "foo=1"], ["disable", "--feature", "foo"]]
    outputs = {}
    for b in pair:
        outputs[b.kind] = [cli.run("kafka-run-class", ["org.apache.kafka.tools.FeatureCommand", "--bootstrap-server",
                                                        b.broker.bootstrap, *args], check=False, timeout=60)
                           for args in commands]
    ours, kafka = ([(done.returncode, "".join(line for line in done.stdout.splitlines(True)
                                              if SHARE_VERSION not in line)) for done in outputs[kind]]
                   for kind in ("ours", "kafka"))
    assert ours == kafka  # share.version aside: Kafka 4.2's feature of the share groups served here
    assert ours[0] == (0, "")
    assert f"Feature: {SHARE_VERSION}" in outputs["ours"][0].stdout
    assert "Could not upgrade metadata.version to 21. Could not apply finalized feature update" in ours[2][1]
    assert "Could not disable foo. Can not delete non-existing finalized feature." in ours[4][1]


# --- SASL ---------------------------------------------------------------------------------------------

def test_another_request_where_sasl_authenticate_is_due_is_answered_then_closed(pair) -> None:
    metadata = MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name="open")],
                               allow_auto_topic_creation=False)
    answers = []
    for b in pair:
        client = RawClient(b.sasl)
        assert client.request(ApiKey.SASL_HANDSHAKE, 1, SaslHandshakeRequest(mechanism="PLAIN")).error_code == 0
        answer = client.request(ApiKey.METADATA, 12, metadata)
        answers.append(([(t.name, t.error_code) for t in answer.topics], answer.brokers))
        assert client.closed_by_broker(), b.kind
        client.close()
    assert answers == [([("open", Errors.ILLEGAL_SASL_STATE)], [])] * 2
