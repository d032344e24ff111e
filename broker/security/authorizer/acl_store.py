"""Where and how the AclAuthorizer keeps ACLs in ZooKeeper (Kafka's ZkAclStore, ZkAclChangeStore).

Literal patterns: ``/kafka-acl/<ResourceType>/<name>``; prefixed: ``/kafka-acl-extended/prefixed/
<ResourceType>/<name>``; value ``{"version":1,"acls":[{"principal":..,"permissionType":"Allow",
"operation":"Read","host":"*"}]}``. Change notifications: ``/kafka-acl-changes/acl_changes_<seq>``
holding ``TOPIC:<name>`` for literal patterns, ``/kafka-acl-extended-changes/acl_changes_<seq>``
holding ``{"version":1,"resourceType":"TOPIC","name":..,"patternType":"PREFIXED"}``. Pure: no I/O.
"""

from __future__ import annotations

import json

from broker.security.authorizer.acl import (
    AccessControlEntry,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
)

LITERAL_ACL_PATH = "/kafka-acl"
PREFIXED_ACL_PATH = "/kafka-acl-extended/prefixed"
LITERAL_CHANGES_PATH = "/kafka-acl-changes"
EXTENDED_CHANGES_PATH = "/kafka-acl-extended-changes"
ACL_CHANGE_PREFIX = "acl_changes_"
ACL_STORES = {PatternType.LITERAL: LITERAL_ACL_PATH, PatternType.PREFIXED: PREFIXED_ACL_PATH}


class MalformedAclError(ValueError):
    pass


def resource_path(pattern: ResourcePattern) -> str:
    return f"{ACL_STORES[pattern.pattern_type]}/{pattern.resource_type.zk_name}/{pattern.name}"


def encode_acls(entries: frozenset[AccessControlEntry] | set[AccessControlEntry]) -> bytes:
    acls = [{"principal": e.principal, "permissionType": e.permission_type.zk_name,
             "operation": e.operation.zk_name, "host": e.host}
            for e in sorted(entries, key=lambda e: (e.principal, e.host, e.operation, e.permission_type))]
    return json.dumps({"version": 1, "acls": acls}, separators=(",", ":")).encode()


def decode_acls(path: str, data: bytes | None) -> frozenset[AccessControlEntry]:
    """The entries stored at a resource's znode (AclEntry.fromBytes); empty for no data."""
    if not data:
        return frozenset()
    try:
        obj = json.loads(data)
        entries = set()
        for acl in obj.get("acls") or []:
            operation = AclOperation.from_name(acl["operation"])
            permission = AclPermissionType.from_name(acl["permissionType"])
            if operation is AclOperation.UNKNOWN or permission is AclPermissionType.UNKNOWN:
                raise MalformedAclError(f"{path}: unknown operation or permission in {acl}")
            entries.add(AccessControlEntry(acl["principal"], acl["host"], operation, permission))
        return frozenset(entries)
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise MalformedAclError(f"{path}: cannot parse ACLs: {exc}") from None


def encode_change(pattern: ResourcePattern) -> tuple[str, bytes]:
    """(changes path, notification data) for a changed resource pattern."""
    if pattern.pattern_type is PatternType.LITERAL:
        return LITERAL_CHANGES_PATH, f"{pattern.resource_type.name}:{pattern.name}".encode()
    return EXTENDED_CHANGES_PATH, json.dumps(
        {"version": 1, "resourceType": pattern.resource_type.name, "name": pattern.name,
         "patternType": pattern.pattern_type.name}, separators=(",", ":")).encode()


def decode_change(changes_path: str, data: bytes | None) -> ResourcePattern:
    text = (data or b"").decode("utf-8", "replace")
    if changes_path == LITERAL_CHANGES_PATH:
        resource_type, sep, name = text.partition(":")
        if not sep:
            raise MalformedAclError(f"expected a string in format ResourceType:ResourceName but got {text}")
        return ResourcePattern(ResourceType.from_name(resource_type), name, PatternType.LITERAL)
    try:
        obj = json.loads(text)
        return ResourcePattern(ResourceType.from_name(obj["resourceType"]), obj["name"],
                               PatternType.from_name(obj["patternType"]))
    except (ValueError, KeyError, TypeError) as exc:
        raise MalformedAclError(f"bad extended ACL change notification {text!r}: {exc}") from None
