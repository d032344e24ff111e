"""The operations a request's principal may perform on a resource (Kafka's AuthHelper.authorizedOperations).

Metadata, DescribeCluster and DescribeGroups answer this as a bitfield of Kafka's AclOperation
codes when the client asks for it. Without an authorizer every operation that applies to the
resource type is allowed (Kafka's AclEntry.supportedOperations); an authorizer, once there is one,
plugs in through ``authorized_operations(..., authorizer=...)`` and narrows that set.
"""

from __future__ import annotations

import enum
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from broker.network.request_channel import Request


class AclOperation(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14


class ResourceType(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


_Op = AclOperation
SUPPORTED_OPERATIONS: dict[ResourceType, tuple[AclOperation, ...]] = {
    ResourceType.TOPIC: (_Op.READ, _Op.WRITE, _Op.CREATE, _Op.DESCRIBE, _Op.DELETE, _Op.ALTER,
                         _Op.DESCRIBE_CONFIGS, _Op.ALTER_CONFIGS),
    ResourceType.GROUP: (_Op.READ, _Op.DESCRIBE, _Op.DELETE),
    ResourceType.CLUSTER: (_Op.CREATE, _Op.CLUSTER_ACTION, _Op.DESCRIBE_CONFIGS, _Op.ALTER_CONFIGS,
                           _Op.IDEMPOTENT_WRITE, _Op.ALTER, _Op.DESCRIBE),
    ResourceType.TRANSACTIONAL_ID: (_Op.DESCRIBE, _Op.WRITE),
    ResourceType.DELEGATION_TOKEN: (_Op.DESCRIBE,),
    ResourceType.USER: (_Op.CREATE_TOKENS, _Op.DESCRIBE_TOKENS),
}
CLUSTER_NAME = "kafka-cluster"


class Authorizer(Protocol):
    def authorize(self, request: Request, operation: AclOperation, resource_type: ResourceType, name: str) -> bool:
        """May the request's principal perform ``operation`` on the named resource?"""


def authorized_operations(request: Request, resource_type: ResourceType, name: str,
                          authorizer: Authorizer | None = None) -> int:
    """The bitfield (bit n for AclOperation code n) of the supported operations the principal may perform."""
    operations = SUPPORTED_OPERATIONS[resource_type]
    if authorizer is not None:
        operations = tuple(op for op in operations if authorizer.authorize(request, op, resource_type, name))
    bits = 0
    for operation in operations:
        bits |= 1 << operation
    return bits
