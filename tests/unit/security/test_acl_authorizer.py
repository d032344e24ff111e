"""The AclAuthorizer's decisions and Kafka's ACL filters, on an in-memory cache (the ZooKeeper side is
tested with real brokers in tests/integration/security)."""
from __future__ import annotations

from typing import Any

from broker.security.authorizer.acl import (
    AccessControlEntry,
    AccessControlEntryFilter,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourcePatternFilter,
    ResourceType,
)
from broker.security.authorizer.acl_authorizer import AclAuthorizer, parse_super_users
from broker.security.authorizer.acl_store import decode_acls, decode_change, encode_acls, encode_change
from broker.security.principal import KafkaPrincipal

Op, Allow, Deny = AclOperation, AclPermissionType.ALLOW, AclPermissionType.DENY
ALICE = KafkaPrincipal("User", "alice")
TOPIC, LITERAL, PREFIXED = ResourceType.TOPIC, PatternType.LITERAL, PatternType.PREFIXED


def _authorizer(acls: dict[ResourcePattern, list[AccessControlEntry]], allow_everyone: bool = False,
                super_users: str = "") -> AclAuthorizer:
    authorizer = AclAuthorizer(zk=_NoZooKeeper(), super_users=parse_super_users(super_users),  # type: ignore[arg-type]
                               allow_everyone_if_no_acl_found=allow_everyone)
    authorizer._cache = {pattern: (frozenset(entries), 0) for pattern, entries in acls.items()}
    return authorizer


class _NoZooKeeper:
    zk: Any = None


def ace(operation: AclOperation, permission: AclPermissionType = Allow, principal: str = "User:alice",
        host: str = "*") -> AccessControlEntry:
    return AccessControlEntry(principal, host, operation, permission)


def test_deny_beats_allow_and_allows_imply_describe() -> None:
    authorizer = _authorizer({
        ResourcePattern(TOPIC, "orders-", PREFIXED): [ace(Op.WRITE)],
        ResourcePattern(TOPIC, "orders-secret", LITERAL): [ace(Op.WRITE, Deny)],
        ResourcePattern(TOPIC, "*", LITERAL): [ace(Op.READ, principal="User:*")],
        ResourcePattern(TOPIC, "configs", LITERAL): [ace(Op.ALTER_CONFIGS)],
    })
    assert authorizer.authorize(ALICE, "10.0.0.1", Op.WRITE, TOPIC, "orders-eu")
    assert authorizer.authorize(ALICE, "10.0.0.1", Op.DESCRIBE, TOPIC, "orders-eu")  # WRITE implies DESCRIBE
    assert not authorizer.authorize(ALICE, "10.0.0.1", Op.WRITE, TOPIC, "orders-secret")
    assert authorizer.authorize(KafkaPrincipal("User", "bob"), "1.2.3.4", Op.READ, TOPIC, "anything")
    assert not authorizer.authorize(ALICE, "10.0.0.1", Op.WRITE, TOPIC, "other")
    assert authorizer.authorize(ALICE, "10.0.0.1", Op.DESCRIBE_CONFIGS, TOPIC, "configs")


def test_hosts_super_users_and_no_acl_found() -> None:
    pattern = ResourcePattern(TOPIC, "t", LITERAL)
    authorizer = _authorizer({pattern: [ace(Op.ALL, host="10.0.0.1")]}, allow_everyone=True,
                             super_users="User:root; User:admin")
    assert authorizer.authorize(ALICE, "10.0.0.1", Op.READ, TOPIC, "t")
    assert not authorizer.authorize(ALICE, "10.0.0.2", Op.READ, TOPIC, "t")  # ACLs exist: no "everyone"
    assert authorizer.authorize(ALICE, "10.0.0.2", Op.READ, TOPIC, "no-acls-here")
    assert authorizer.authorize(KafkaPrincipal("User", "admin"), "10.0.0.2", Op.DELETE, TOPIC, "t")
    assert not _authorizer({}).authorize(ALICE, "10.0.0.1", Op.READ, TOPIC, "t")


def test_authorize_by_resource_type_for_idempotent_producers() -> None:
    allowed = _authorizer({ResourcePattern(TOPIC, "a-", PREFIXED): [ace(Op.WRITE)]})
    assert allowed.authorize_by_resource_type(ALICE, "h", Op.WRITE, TOPIC)
    denied_everywhere = _authorizer({ResourcePattern(TOPIC, "a-", PREFIXED): [ace(Op.WRITE)],
                                     ResourcePattern(TOPIC, "*", LITERAL): [ace(Op.WRITE, Deny)]})
    assert not denied_everywhere.authorize_by_resource_type(ALICE, "h", Op.WRITE, TOPIC)
    shadowed = _authorizer({ResourcePattern(TOPIC, "a-b", PREFIXED): [ace(Op.WRITE)],
                            ResourcePattern(TOPIC, "a-", PREFIXED): [ace(Op.WRITE, Deny)]})
    assert not shadowed.authorize_by_resource_type(ALICE, "h", Op.WRITE, TOPIC)


def test_filters_match_as_kafka() -> None:
    literal = ResourcePattern(TOPIC, "orders", LITERAL)
    wildcard = ResourcePattern(TOPIC, "*", LITERAL)
    prefixed = ResourcePattern(TOPIC, "ord", PREFIXED)
    match = ResourcePatternFilter(TOPIC, "orders", PatternType.MATCH)
    assert match.matches(literal) and match.matches(wildcard) and match.matches(prefixed)
    assert not match.matches(ResourcePattern(TOPIC, "orders-eu", LITERAL))
    any_ = ResourcePatternFilter(ResourceType.ANY, "orders", PatternType.ANY)
    assert any_.matches(literal) and not any_.matches(prefixed)
    assert not ResourcePatternFilter(TOPIC, None, PatternType.ANY).matches_at_most_one()
    entry = AccessControlEntryFilter(None, None, Op.ANY, AclPermissionType.ANY)
    assert AclBindingFilter(any_, entry).matches(AclBinding(literal, ace(Op.READ)))
    assert not AccessControlEntryFilter("User:bob", None, Op.ANY, AclPermissionType.ANY).matches(ace(Op.READ))


def test_stored_formats_are_kafkas() -> None:
    entries = frozenset({ace(Op.IDEMPOTENT_WRITE), ace(Op.DESCRIBE_CONFIGS, Deny, "User:*", "10.0.0.5")})
    data = encode_acls(entries)
    assert b'"operation":"IdempotentWrite"' in data and b'"permissionType":"Deny"' in data
    assert decode_acls("/kafka-acl/Topic/t", data) == entries
    path, change = encode_change(ResourcePattern(ResourceType.TRANSACTIONAL_ID, "tx", LITERAL))
    assert (path, change) == ("/kafka-acl-changes", b"TRANSACTIONAL_ID:tx")
    assert decode_change("/kafka-acl-changes", b"Topic:a:b") == ResourcePattern(TOPIC, "a:b", LITERAL)
    path, change = encode_change(ResourcePattern(TOPIC, "pay-", PREFIXED))
    assert path == "/kafka-acl-extended-changes"
    assert decode_change(path, change) == ResourcePattern(TOPIC, "pay-", PREFIXED)
