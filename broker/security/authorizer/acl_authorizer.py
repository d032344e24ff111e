"""AclAuthorizer: Kafka's ZooKeeper-mode authorizer (``kafka.security.authorizer.AclAuthorizer``).

ACLs live in ZooKeeper (``acl_store``) and in an in-memory cache that every broker keeps current
from the change notification queues, so ``authorize`` reads only memory. The decision is Kafka's:
super users may do anything; a DENY that matches (principal or ``User:*``, host or ``*``, the
operation or ALL) wins over any ALLOW; an ALLOW of READ, WRITE, DELETE or ALTER implies DESCRIBE,
and ALTER_CONFIGS implies DESCRIBE_CONFIGS; with no ACL at all on the resource, the answer is
``allow.everyone.if.no.acl.found``. The ACLs of a resource are those of its literal name, of the
literal ``*`` and of every prefixed pattern its name starts with.

ZooKeeper writes are conditional on the znode's version and retried, the znode is deleted when its
last ACL goes, and each change is announced on the queue of its pattern type.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable

from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError

from broker.security.authorizer.acl import (
    WILDCARD_HOST,
    WILDCARD_PRINCIPAL,
    WILDCARD_RESOURCE,
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
)
from broker.security.authorizer.acl_store import (
    ACL_CHANGE_PREFIX,
    ACL_STORES,
    EXTENDED_CHANGES_PATH,
    LITERAL_CHANGES_PATH,
    MalformedAclError,
    decode_acls,
    decode_change,
    encode_acls,
    encode_change,
    resource_path,
)
from broker.security.principal import KafkaPrincipal
from coordination.kafka_zk_client import KafkaZkClient
from coordination.notification_listener import ZkNodeChangeNotificationListener

log = logging.getLogger(__name__)
audit = logging.getLogger("kafka.authorizer.logger")

ACL_AUTHORIZER_CLASS = "kafka.security.authorizer.AclAuthorizer"
MAX_UPDATE_RETRIES = 10
_IMPLIED_BY = {AclOperation.DESCRIBE: (AclOperation.DESCRIBE, AclOperation.READ, AclOperation.WRITE,
                                       AclOperation.DELETE, AclOperation.ALTER),
               AclOperation.DESCRIBE_CONFIGS: (AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS)}

Cache = dict[ResourcePattern, tuple[frozenset[AccessControlEntry], int]]


class AclUpdateError(RuntimeError):
    pass


def parse_super_users(text: str) -> frozenset[str]:
    """``super.users``: ``User:alice;User:bob`` (principals separated by semicolons)."""
    return frozenset(str(KafkaPrincipal.parse(p.strip())) for p in text.split(";") if p.strip())


class AclAuthorizer:
    def __init__(self, zk: KafkaZkClient, super_users: frozenset[str], allow_everyone_if_no_acl_found: bool) -> None:
        self.zk = zk
        self.super_users = super_users
        self.allow_everyone_if_no_acl_found = allow_everyone_if_no_acl_found
        self._cache: Cache = {}  # replaced, never mutated: readers on the event loop see one snapshot
        self._lock = threading.Lock()
        self._listeners = [
            ZkNodeChangeNotificationListener(zk, LITERAL_CHANGES_PATH, ACL_CHANGE_PREFIX, self._on_change),
            ZkNodeChangeNotificationListener(zk, EXTENDED_CHANGES_PATH, ACL_CHANGE_PREFIX, self._on_change),
        ]

    # --- lifecycle (blocking: ZooKeeper) --------------------------------------------------------------
    def start(self) -> None:
        """Create the paths, start listening for changes, then load every ACL (so none is missed)."""
        for path in (*ACL_STORES.values(), LITERAL_CHANGES_PATH, EXTENDED_CHANGES_PATH):
            self.zk.zk.ensure_persistent_path(path)
        for listener in self._listeners:
            listener.start()
        with self._lock:
            cache: Cache = {}
            for pattern_type, root in ACL_STORES.items():
                for type_name in self.zk.get_children(root):
                    resource_type = ResourceType.from_name(type_name)
                    if resource_type is ResourceType.UNKNOWN:
                        log.warning("Ignoring unknown ResourceType: %s", type_name)
                        continue
                    for name in self.zk.get_children(f"{root}/{type_name}"):
                        pattern = ResourcePattern(resource_type, name, pattern_type)
                        entries, version = self._read(pattern)
                        if entries:
                            cache[pattern] = (entries, version)
            self._cache = cache

    def close(self) -> None:
        for listener in self._listeners:
            listener.close()

    def _read(self, pattern: ResourcePattern) -> tuple[frozenset[AccessControlEntry], int]:
        path = resource_path(pattern)
        data, stat = self.zk.zk.get_data(path)
        if stat is None:
            return frozenset(), -1
        try:
            return decode_acls(path, data), stat.version
        except MalformedAclError as exc:
            log.error("Ignoring malformed ACLs: %s", exc)
            return frozenset(), stat.version

    def _on_change(self, changes_path: str, data: bytes | None) -> None:
        try:
            pattern = decode_change(changes_path.rsplit("/", 1)[0], data)
        except MalformedAclError as exc:
            log.error("Ignoring ACL change notification: %s", exc)
            return
        with self._lock:
            self._set_cached(pattern, *self._read(pattern))
        log.info("Processed Acl change notification for %s", pattern)

    def _set_cached(self, pattern: ResourcePattern, entries: frozenset[AccessControlEntry], version: int) -> None:
        cache = dict(self._cache)
        if entries:
            cache[pattern] = (entries, version)
        else:
            cache.pop(pattern, None)
        self._cache = cache

    # --- authorization (memory only: called on the event loop) -------------------------------------
    def _matching(self, resource_type: ResourceType, name: str) -> list[AccessControlEntry]:
        cache = self._cache
        found: list[AccessControlEntry] = []
        for literal in (WILDCARD_RESOURCE, name):
            entry = cache.get(ResourcePattern(resource_type, literal, PatternType.LITERAL))
            if entry is not None:
                found.extend(entry[0])
        for end in range(len(name) + 1):
            entry = cache.get(ResourcePattern(resource_type, name[:end], PatternType.PREFIXED))
            if entry is not None:
                found.extend(entry[0])
        return found

    def authorize(self, principal: KafkaPrincipal, host: str, operation: AclOperation,
                  resource_type: ResourceType, name: str, log_if_denied: bool = True) -> bool:
        principal_text = str(principal)
        allowed = principal_text in self.super_users or self._acls_allow(principal_text, host, operation,
                                                                         resource_type, name)
        if allowed:
            audit.debug("Principal = %s is Allowed Operation = %s from host = %s on resource = %s:LITERAL:%s",
                        principal_text, operation.zk_name, host, resource_type.zk_name, name)
        elif log_if_denied:
            audit.info("Principal = %s is Denied Operation = %s from host = %s on resource = %s:LITERAL:%s",
                       principal_text, operation.zk_name, host, resource_type.zk_name, name)
        return allowed

    def _acls_allow(self, principal: str, host: str, operation: AclOperation, resource_type: ResourceType,
                    name: str) -> bool:
        entries = self._matching(resource_type, name)
        if not entries:
            return self.allow_everyone_if_no_acl_found

        def matches(entry: AccessControlEntry, op: AclOperation, permission: AclPermissionType) -> bool:
            return (entry.permission_type is permission and entry.principal in (principal, WILDCARD_PRINCIPAL)
                    and entry.operation in (op, AclOperation.ALL) and entry.host in (host, WILDCARD_HOST))

        if any(matches(e, operation, AclPermissionType.DENY) for e in entries):
            return False
        return any(matches(e, op, AclPermissionType.ALLOW) for e in entries
                   for op in _IMPLIED_BY.get(operation, (operation,)))

    def authorize_by_resource_type(self, principal: KafkaPrincipal, host: str, operation: AclOperation,
                                   resource_type: ResourceType) -> bool:
        """Could the principal do ``operation`` on some resource of this type (KIP-679's check for
        idempotent producers)? An ALLOW counts unless a DENY covers it (a literal ``*`` DENY covers all)."""
        principal_text = str(principal)
        if principal_text in self.super_users:
            return True
        principals, hosts = (principal_text, WILDCARD_PRINCIPAL), (host, WILDCARD_HOST)
        ops = (operation, AclOperation.ALL)

        def names(permission: AclPermissionType, pattern_type: PatternType) -> set[str]:
            return {p.name for p, (entries, _) in self._cache.items()
                    if p.resource_type is resource_type and p.pattern_type is pattern_type
                    and any(e.permission_type is permission and e.principal in principals and e.host in hosts
                            and e.operation in ops for e in entries)}

        deny_literals = names(AclPermissionType.DENY, PatternType.LITERAL)
        if WILDCARD_RESOURCE in deny_literals:
            return False
        if self.allow_everyone_if_no_acl_found:
            return True
        deny_prefixes = names(AclPermissionType.DENY, PatternType.PREFIXED)

        def denied_by_prefix(name: str) -> bool:
            return any(name[:end] in deny_prefixes for end in range(len(name) + 1))

        allow_prefixes = names(AclPermissionType.ALLOW, PatternType.PREFIXED)
        allow_literals = names(AclPermissionType.ALLOW, PatternType.LITERAL)
        return (any(not denied_by_prefix(p) for p in allow_prefixes)
                or any(n == WILDCARD_RESOURCE or (n not in deny_literals and not denied_by_prefix(n))
                       for n in allow_literals))

    # --- ACL administration (blocking: ZooKeeper) ---------------------------------------------------
    def acls(self, binding_filter: AclBindingFilter) -> list[AclBinding]:
        return [AclBinding(pattern, entry) for pattern, (entries, _) in sorted(
                    self._cache.items(), key=lambda item: (item[0].resource_type, item[0].pattern_type, item[0].name))
                for entry in sorted(entries, key=lambda e: (e.principal, e.host, e.operation, e.permission_type))
                if binding_filter.matches(AclBinding(pattern, entry))]

    def create_acls(self, bindings: list[AclBinding]) -> list[Exception | None]:
        """One result per binding: None, or the failure (Kafka's AclCreateResult)."""
        results: list[Exception | None] = [None] * len(bindings)
        by_pattern: dict[ResourcePattern, list[int]] = {}
        for index, binding in enumerate(bindings):
            by_pattern.setdefault(binding.pattern, []).append(index)
        with self._lock:
            for pattern, indexes in by_pattern.items():
                new = {bindings[i].entry for i in indexes}
                try:
                    self._update(pattern, lambda current, new=frozenset(new): current | new)
                except Exception as exc:  # every binding of the pattern fails alike
                    for i in indexes:
                        results[i] = exc
        return results

    def delete_acls(self, filters: list[AclBindingFilter]) -> list[list[tuple[AclBinding, Exception | None]]]:
        """Per filter, the bindings it deleted (each with the failure to delete it, if any)."""
        results: list[list[tuple[AclBinding, Exception | None]]] = [[] for _ in filters]
        with self._lock:
            patterns = set(self._cache)
            for f in filters:
                if f.pattern.matches_at_most_one():
                    patterns.add(ResourcePattern(f.pattern.resource_type, f.pattern.name or "",
                                                 f.pattern.pattern_type))
            for pattern in sorted(patterns, key=lambda p: (p.resource_type, p.pattern_type, p.name)):
                matching = [(i, f) for i, f in enumerate(filters) if f.pattern.matches(pattern)]
                if not matching:
                    continue
                deleted: dict[AccessControlEntry, int] = {}

                def remove(current: frozenset[AccessControlEntry]) -> frozenset[AccessControlEntry]:
                    deleted.clear()
                    for entry in current:
                        for i, f in matching:
                            if f.entry.matches(entry):
                                deleted.setdefault(entry, i)
                    return current - deleted.keys()

                error: Exception | None = None
                try:
                    self._update(pattern, remove)
                except Exception as exc:
                    error = exc
                for entry, i in deleted.items():
                    results[i].append((AclBinding(pattern, entry), error))
        return results

    def _update(self, pattern: ResourcePattern,
                change: Callable[[frozenset[AccessControlEntry]], frozenset[AccessControlEntry]]) -> None:
        """Apply ``change(current entries) -> new entries`` to the znode, conditional on its version."""
        if pattern.name == "" or "/" in pattern.name:
            raise ValueError(f"ACL binding contains invalid resource name: {pattern.name}")
        current, version = self._cache.get(pattern) or self._read(pattern)
        path = resource_path(pattern)
        zk = self.zk.zk
        for _ in range(MAX_UPDATE_RETRIES + 1):
            new = frozenset(change(current))
            try:
                if new == current and version >= 0:
                    break
                if not new:
                    if version >= 0:
                        zk.delete(path, version)
                    new_version = -1
                elif version >= 0:
                    new_version = zk.set_data(path, encode_acls(new), version).version
                else:
                    zk.create_recursive(path, encode_acls(new))
                    new_version = 0
            except (BadVersionError, NodeExistsError, NoNodeError):
                time.sleep((100 + random.randint(0, 50)) / 1000)
                current, version = self._read(pattern)
                continue
            self._set_cached(pattern, new, new_version)
            if new != current:
                log.info("Updated ACLs for %s with new version %d", pattern, new_version)
                changes_path, data = encode_change(pattern)
                zk.create_recursive(f"{changes_path}/{ACL_CHANGE_PREFIX}", data, sequence=True)
            return
        else:
            raise AclUpdateError(f"Failed to update ACLs for {pattern} after trying a maximum of "
                                 f"{MAX_UPDATE_RETRIES} times")

