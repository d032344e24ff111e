"""Authorization of requests (Kafka's AuthHelper): one declarative table for the APIs that need a
single cluster-level permission, checked before their handler runs, and small helpers the other
handlers call for their topics, groups and transactional ids.

Without ``authorizer.class.name`` everything is allowed and the helpers cost one attribute check.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, TypeVar

from broker.security.authorizer.acl import CLUSTER_NAME, SUPPORTED_OPERATIONS, AclOperation, ResourceType
from protocol.api_keys import ApiKey

if TYPE_CHECKING:
    from broker.network.request_channel import Request
    from broker.security.authorizer.acl_authorizer import AclAuthorizer

T = TypeVar("T")

# API -> the operation on the cluster resource it needs; a denial answers CLUSTER_AUTHORIZATION_FAILED
# in the API's own error response (Kafka's authorizeClusterOperation and its equivalents).
CLUSTER_OPERATIONS: dict[ApiKey, AclOperation] = {
    ApiKey.LEADER_AND_ISR: AclOperation.CLUSTER_ACTION,
    ApiKey.STOP_REPLICA: AclOperation.CLUSTER_ACTION,
    ApiKey.UPDATE_METADATA: AclOperation.CLUSTER_ACTION,
    ApiKey.CONTROLLED_SHUTDOWN: AclOperation.CLUSTER_ACTION,
    ApiKey.ALTER_PARTITION: AclOperation.CLUSTER_ACTION,
    ApiKey.ALLOCATE_PRODUCER_IDS: AclOperation.CLUSTER_ACTION,
    ApiKey.WRITE_TXN_MARKERS: AclOperation.CLUSTER_ACTION,
    ApiKey.DESCRIBE_ACLS: AclOperation.DESCRIBE,
    ApiKey.CREATE_ACLS: AclOperation.ALTER,
    ApiKey.DELETE_ACLS: AclOperation.ALTER,
    ApiKey.ELECT_LEADERS: AclOperation.ALTER,
    ApiKey.ALTER_PARTITION_REASSIGNMENTS: AclOperation.ALTER,
    ApiKey.LIST_PARTITION_REASSIGNMENTS: AclOperation.DESCRIBE,
    ApiKey.ALTER_REPLICA_LOG_DIRS: AclOperation.ALTER,
    ApiKey.DESCRIBE_CLIENT_QUOTAS: AclOperation.DESCRIBE_CONFIGS,
    ApiKey.ALTER_CLIENT_QUOTAS: AclOperation.ALTER_CONFIGS,
    ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: AclOperation.DESCRIBE,
    ApiKey.ALTER_USER_SCRAM_CREDENTIALS: AclOperation.ALTER,
    ApiKey.UPDATE_FEATURES: AclOperation.ALTER,
}


class AuthHelper:
    def __init__(self, authorizer: AclAuthorizer | None) -> None:
        self.authorizer = authorizer

    def authorize(self, request: Request, operation: AclOperation, resource_type: ResourceType, name: str,
                  log_if_denied: bool = True) -> bool:
        authorizer = self.authorizer
        if authorizer is None:
            return True
        return authorizer.authorize(request.principal, request.client_address[0], operation, resource_type, name,
                                    log_if_denied)

    def authorize_cluster(self, request: Request, operation: AclOperation, log_if_denied: bool = True) -> bool:
        return self.authorize(request, operation, ResourceType.CLUSTER, CLUSTER_NAME, log_if_denied)

    def authorize_by_resource_type(self, request: Request, operation: AclOperation,
                                   resource_type: ResourceType) -> bool:
        authorizer = self.authorizer
        if authorizer is None:
            return True
        return authorizer.authorize_by_resource_type(request.principal, request.client_address[0], operation,
                                                     resource_type)

    def filter_authorized(self, request: Request, operation: AclOperation, resource_type: ResourceType,
                          items: Iterable[T], name: Callable[[T], str] = str, log_if_denied: bool = True) -> set[str]:
        """The names among ``items`` the request may ``operation`` (each name checked once)."""
        names = {name(item) for item in items}
        if self.authorizer is None:
            return names
        return {n for n in names if self.authorize(request, operation, resource_type, n, log_if_denied)}

    def authorized_operations(self, request: Request, resource_type: ResourceType, name: str) -> int:
        """The bit set of ``SUPPORTED_OPERATIONS`` the request may do (bit = operation code)."""
        bits = 0
        for operation in SUPPORTED_OPERATIONS[resource_type]:
            if self.authorize(request, operation, resource_type, name, log_if_denied=False):
                bits |= 1 << operation
        return bits


NO_AUTHORIZATION = AuthHelper(None)
