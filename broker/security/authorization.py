"""Authorization of requests (Kafka's AuthHelper): one declarative table for the APIs that need a
single permission on the whole request, checked before their handler runs, and small helpers the
other handlers call for their topics, groups and transactional ids.

Without ``authorizer.class.name`` everything is allowed and the helpers cost one attribute check.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar

from broker.security.authorizer.acl import CLUSTER_NAME, SUPPORTED_OPERATIONS, AclOperation, ResourceType
from protocol.api_keys import ApiKey
from protocol.errors import Errors

if TYPE_CHECKING:
    from broker.network.request_channel import Request
    from broker.security.authorizer.acl_authorizer import AclAuthorizer

T = TypeVar("T")



@dataclass(frozen=True)
class RequiredPermission:
    """The one permission an API needs on the whole request, and the error a denial answers."""

    operation: AclOperation
    resource_type: ResourceType
    name: Callable[[Request], str]
    error: Errors


def _cluster(operation: AclOperation) -> RequiredPermission:
    return RequiredPermission(operation, ResourceType.CLUSTER, lambda _: CLUSTER_NAME, Errors.CLUSTER_AUTHORIZATION_FAILED)


def _transactional_id(operation: AclOperation) -> RequiredPermission:
    return RequiredPermission(operation, ResourceType.TRANSACTIONAL_ID, lambda request: request.body().transactional_id,
                              Errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)


def _group(operation: AclOperation) -> RequiredPermission:
    return RequiredPermission(operation, ResourceType.GROUP, lambda request: request.body().group_id,
                              Errors.GROUP_AUTHORIZATION_FAILED)


# APIs whose whole request one permission gates; checked before the handler runs, a denial is
# answered with the API's own error response (Kafka's authorizeClusterOperation and the group
# checks at the top of its group handlers). Other checks are per resource, in the handlers.
REQUEST_PERMISSIONS: dict[ApiKey, RequiredPermission] = {
    **{api: _cluster(AclOperation.CLUSTER_ACTION) for api in (
        ApiKey.LEADER_AND_ISR, ApiKey.STOP_REPLICA, ApiKey.UPDATE_METADATA, ApiKey.CONTROLLED_SHUTDOWN,
        ApiKey.ALTER_PARTITION, ApiKey.ALLOCATE_PRODUCER_IDS, ApiKey.WRITE_TXN_MARKERS)},
    **{api: _cluster(AclOperation.ALTER) for api in (
        ApiKey.CREATE_ACLS, ApiKey.DELETE_ACLS, ApiKey.ELECT_LEADERS, ApiKey.ALTER_PARTITION_REASSIGNMENTS,
        ApiKey.ALTER_REPLICA_LOG_DIRS, ApiKey.ALTER_USER_SCRAM_CREDENTIALS, ApiKey.UPDATE_FEATURES)},
    **{api: _cluster(AclOperation.DESCRIBE) for api in (
        ApiKey.DESCRIBE_ACLS, ApiKey.LIST_PARTITION_REASSIGNMENTS, ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS)},
    ApiKey.DESCRIBE_CLIENT_QUOTAS: _cluster(AclOperation.DESCRIBE_CONFIGS),
    ApiKey.ALTER_CLIENT_QUOTAS: _cluster(AclOperation.ALTER_CONFIGS),
    **{api: _group(AclOperation.READ) for api in (
        ApiKey.JOIN_GROUP, ApiKey.SYNC_GROUP, ApiKey.HEARTBEAT, ApiKey.LEAVE_GROUP, ApiKey.OFFSET_COMMIT,
        ApiKey.CONSUMER_GROUP_HEARTBEAT)},
    ApiKey.OFFSET_DELETE: _group(AclOperation.DELETE),
    ApiKey.END_TXN: _transactional_id(AclOperation.WRITE),
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

    def check_request(self, request: Request) -> Errors | None:
        """The error of a request its API's ``REQUEST_PERMISSIONS`` entry denies, else None."""
        permission = REQUEST_PERMISSIONS.get(ApiKey(request.api_key)) if self.authorizer is not None else None
        if permission is None or self.authorize(request, permission.operation, permission.resource_type,
                                                permission.name(request)):
            return None
        return permission.error

    def transaction_and_group_denied(self, request: Request, transactional_id: str, group_id: str) -> Errors | None:
        """WRITE on the transactional id, then READ on the group (AddOffsetsToTxn, TxnOffsetCommit)."""
        if not self.authorize(request, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, transactional_id):
            return Errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
        if not self.authorize(request, AclOperation.READ, ResourceType.GROUP, group_id):
            return Errors.GROUP_AUTHORIZATION_FAILED
        return None

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
