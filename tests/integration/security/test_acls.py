"""The AclAuthorizer with real clients: denied writes and group joins get Kafka's errors and
change nothing, prefixed and wildcard ACLs, DENY over ALLOW, topics hidden from Metadata, and
``kafka-acls.sh`` through the admin API and through ZooKeeper seeing each other's ACLs."""
from __future__ import annotations

import time

import pytest

from tests.harness.kafka_cli import kafka_cli
from tests.integration.security.security_setup import java_client_properties, librdkafka_config

pytestmark = pytest.mark.integration

BROKER_SETTINGS = {"authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
                   # admin for the tools; ANONYMOUS is the harness on its own PLAINTEXT listener
                   "super.users": "User:admin;User:ANONYMOUS",
                   "listener.name.ssl.ssl.principal.mapping.rules": "RULE:^CN=(.*?),OU=Clients$/$1/L,DEFAULT"}


def _client(secure_broker, user: str) -> dict[str, str]:
    return {**librdkafka_config("SASL_PLAINTEXT", "SCRAM-SHA-256", user, secure_broker.pki),
            "bootstrap.servers": secure_broker.bootstrap("SASL_PLAINTEXT")}


def _admin(secure_broker):
    from confluent_kafka.admin import AdminClient

    return AdminClient(_client(secure_broker, "admin"))


def _acl(resource: str, name: str, principal: str, operation: str, permission: str = "ALLOW",
         pattern: str = "LITERAL"):
    from confluent_kafka.admin import AclBinding, AclOperation, AclPermissionType, ResourcePatternType, ResourceType

    return AclBinding(ResourceType[resource], name, ResourcePatternType[pattern], principal, "*",
                      AclOperation[operation], AclPermissionType[permission])


def _create_acls(secure_broker, *bindings) -> None:
    admin = _admin(secure_broker)  # kept alive until the futures are done
    for future in admin.create_acls(list(bindings)).values():
        future.result(timeout=15)


def _produce_error(secure_broker, user: str, topic: str) -> str | None:
    from confluent_kafka import Producer

    errors: list[str] = []
    producer = Producer({**_client(secure_broker, user), "message.timeout.ms": 5000})
    producer.produce(topic, b"x", on_delivery=lambda err, _m: err and errors.append(err.name()))
    producer.flush(15)
    return errors[0] if errors else None


def _log_end(secure_broker, topic: str) -> int:
    from protocol.messages import ListOffsetsRequest

    response = secure_broker.broker.request(2, 1, ListOffsetsRequest(replica_id=-1, topics=[
        ListOffsetsRequest.ListOffsetsTopic(name=topic, partitions=[
            ListOffsetsRequest.ListOffsetsPartition(partition_index=0, timestamp=-1)])]))
    return response.topics[0].partitions[0].offset


def test_denied_write_gets_topic_authorization_failed_and_stores_nothing(secure_broker) -> None:
    secure_broker.broker.create_topic("secret")
    assert _produce_error(secure_broker, "alice", "secret") == "TOPIC_AUTHORIZATION_FAILED"
    assert _log_end(secure_broker, "secret") == 0
    _create_acls(secure_broker, _acl("TOPIC", "secret", "User:alice", "WRITE"))
    assert _produce_error(secure_broker, "alice", "secret") is None
    assert _log_end(secure_broker, "secret") == 1


def test_denied_group_join_gets_group_authorization_failed(secure_broker) -> None:
    from confluent_kafka import Consumer

    secure_broker.broker.create_topic("readable")
    _create_acls(secure_broker, _acl("TOPIC", "readable", "User:alice", "READ"))
    consumer = Consumer({**_client(secure_broker, "alice"), "group.id": "not-alices", "auto.offset.reset": "earliest"})
    consumer.subscribe(["readable"])
    error = None
    deadline = time.monotonic() + 30
    while error is None and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is not None and message.error() is not None:
            error = message.error().name()
    consumer.close()
    assert error == "GROUP_AUTHORIZATION_FAILED"


def test_prefixed_wildcard_and_deny_over_allow(secure_broker) -> None:
    for topic in ("team-a", "team-b", "other"):
        secure_broker.broker.create_topic(topic)
    _create_acls(secure_broker,
                 _acl("TOPIC", "team-", "User:alice", "WRITE", pattern="PREFIXED"),
                 _acl("TOPIC", "team-b", "User:alice", "WRITE", permission="DENY"),
                 _acl("TOPIC", "*", "User:bob", "DESCRIBE"))
    assert _produce_error(secure_broker, "alice", "team-a") is None
    assert _produce_error(secure_broker, "alice", "team-b") == "TOPIC_AUTHORIZATION_FAILED"
    assert _produce_error(secure_broker, "alice", "other") == "TOPIC_AUTHORIZATION_FAILED"

    # Metadata lists only what the principal may DESCRIBE (WRITE implies DESCRIBE).
    from confluent_kafka.admin import AdminClient

    alice_topics = set(AdminClient(_client(secure_broker, "alice")).list_topics(timeout=10).topics)
    assert "team-a" in alice_topics and "other" not in alice_topics
    bob = {**librdkafka_config("SASL_PLAINTEXT", "PLAIN", "bob", secure_broker.pki),
           "bootstrap.servers": secure_broker.bootstrap("SASL_PLAINTEXT")}
    assert {"team-a", "team-b", "other"} <= set(AdminClient(bob).list_topics(timeout=10).topics)


def test_kafka_acls_sh_through_the_admin_api_and_through_zookeeper(secure_broker, tmp_path) -> None:
    cli = kafka_cli(tmp_path)
    admin_properties = java_client_properties(tmp_path / "admin.properties", "SASL_PLAINTEXT", "SCRAM-SHA-512",
                                              "admin", secure_broker.pki)
    bootstrap = ["--bootstrap-server", secure_broker.bootstrap("SASL_PLAINTEXT"), "--command-config",
                 str(admin_properties)]
    zookeeper = ["--authorizer-properties", f"zookeeper.connect={secure_broker.zk_connect}"]
    cli.run("kafka-acls", [*bootstrap, "--add", "--allow-principal", "User:carol", "--operation", "Read",
                           "--group", "carols-group"])
    cli.run("kafka-acls", [*zookeeper, "--add", "--deny-principal", "User:carol", "--operation", "All",
                           "--topic", "pay-", "--resource-pattern-type", "prefixed"])
    for source in (bootstrap, zookeeper):
        listed = cli.run("kafka-acls", [*source, "--list"]).stdout
        assert "name=carols-group, patternType=LITERAL" in listed and "principal=User:carol" in listed
        assert "name=pay-, patternType=PREFIXED" in listed and "permissionType=DENY" in listed
    # The broker enforces the ACL written straight to ZooKeeper (it learnt it from the change queue).
    from protocol.messages import MetadataRequest

    cli.run("kafka-acls", [*bootstrap, "--remove", "--force", "--allow-principal", "User:carol", "--operation",
                           "Read", "--group", "carols-group"])
    listed = cli.run("kafka-acls", [*zookeeper, "--list"]).stdout
    assert "carols-group" not in listed
    assert secure_broker.broker.request(3, 12, MetadataRequest(topics=None)).brokers



def test_tls_client_certificates_are_principals(secure_broker) -> None:
    """SSL with a client certificate: the principal is its subject through ssl.principal.mapping.rules."""
    secure_broker.broker.create_topic("by-certificate")
    certificate = secure_broker.pki.issue("erin", "CN=Erin,OU=Clients")
    tls = {"security.protocol": "SSL", "ssl.ca.location": str(secure_broker.pki.ca_file),
           "ssl.certificate.location": str(certificate.cert), "ssl.key.location": str(certificate.key),
           "bootstrap.servers": secure_broker.bootstrap("SSL")}

    def produce_error() -> str | None:
        from confluent_kafka import Producer

        errors: list[str] = []
        producer = Producer({**tls, "message.timeout.ms": 5000})
        producer.produce("by-certificate", b"x", on_delivery=lambda err, _m: err and errors.append(err.name()))
        producer.flush(15)
        return errors[0] if errors else None

    assert produce_error() == "TOPIC_AUTHORIZATION_FAILED"
    _create_acls(secure_broker, _acl("TOPIC", "by-certificate", "User:erin", "WRITE"))  # the rule lower-cases CN
    assert produce_error() is None


def _first_error(consumer, seconds: float = 30) -> str | None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is not None and message.error() is not None:
            return message.error().name()
    return None


def test_consumer_protocol_members_need_group_read_and_topic_describe(secure_broker) -> None:
    from confluent_kafka import Consumer

    secure_broker.broker.create_topic("hidden-848")
    _create_acls(secure_broker, _acl("GROUP", "alices-848", "User:alice", "READ"))
    denied_group = Consumer({**_client(secure_broker, "alice"), "group.id": "not-alices-848",
                             "group.protocol": "consumer"})
    denied_group.subscribe(["hidden-848"])
    assert _first_error(denied_group) == "GROUP_AUTHORIZATION_FAILED"
    denied_group.close()
    denied_topic = Consumer({**_client(secure_broker, "alice"), "group.id": "alices-848", "group.protocol": "consumer"})
    denied_topic.subscribe(["hidden-848"])
    assert _first_error(denied_topic) == "TOPIC_AUTHORIZATION_FAILED"
    denied_topic.close()
