"""Kafka's protocol error codes, whether clients retry them, and a short message.

Codes, names and retriability follow Kafka 3.9's ``Errors`` (plus the 4.x codes
128-133 that newer clients know); see ``../shared/kafka-protocol/ERRORS.md``.
Handlers raise :class:`KafkaApiError` to answer a request with a code.
"""

from __future__ import annotations

from enum import IntEnum


class Errors(IntEnum):
    UNKNOWN_SERVER_ERROR = -1
    NONE = 0
    OFFSET_OUT_OF_RANGE = 1
    CORRUPT_MESSAGE = 2
    UNKNOWN_TOPIC_OR_PARTITION = 3
    INVALID_FETCH_SIZE = 4
    LEADER_NOT_AVAILABLE = 5
    NOT_LEADER_OR_FOLLOWER = 6
    REQUEST_TIMED_OUT = 7
    BROKER_NOT_AVAILABLE = 8
    REPLICA_NOT_AVAILABLE = 9
    MESSAGE_TOO_LARGE = 10
    STALE_CONTROLLER_EPOCH = 11
    OFFSET_METADATA_TOO_LARGE = 12
    NETWORK_EXCEPTION = 13
    COORDINATOR_LOAD_IN_PROGRESS = 14
    COORDINATOR_NOT_AVAILABLE = 15
    NOT_COORDINATOR = 16
    INVALID_TOPIC_EXCEPTION = 17
    RECORD_LIST_TOO_LARGE = 18
    NOT_ENOUGH_REPLICAS = 19
    NOT_ENOUGH_REPLICAS_AFTER_APPEND = 20
    INVALID_REQUIRED_ACKS = 21
    ILLEGAL_GENERATION = 22
    INCONSISTENT_GROUP_PROTOCOL = 23
    INVALID_GROUP_ID = 24
    UNKNOWN_MEMBER_ID = 25
    INVALID_SESSION_TIMEOUT = 26
    REBALANCE_IN_PROGRESS = 27
    INVALID_COMMIT_OFFSET_SIZE = 28
    TOPIC_AUTHORIZATION_FAILED = 29
    GROUP_AUTHORIZATION_FAILED = 30
    CLUSTER_AUTHORIZATION_FAILED = 31
    INVALID_TIMESTAMP = 32
    UNSUPPORTED_SASL_MECHANISM = 33
    ILLEGAL_SASL_STATE = 34
    UNSUPPORTED_VERSION = 35
    TOPIC_ALREADY_EXISTS = 36
    INVALID_PARTITIONS = 37
    INVALID_REPLICATION_FACTOR = 38
    INVALID_REPLICA_ASSIGNMENT = 39
    INVALID_CONFIG = 40
    NOT_CONTROLLER = 41
    INVALID_REQUEST = 42
    UNSUPPORTED_FOR_MESSAGE_FORMAT = 43
    POLICY_VIOLATION = 44
    OUT_OF_ORDER_SEQUENCE_NUMBER = 45
    DUPLICATE_SEQUENCE_NUMBER = 46
    INVALID_PRODUCER_EPOCH = 47
    INVALID_TXN_STATE = 48
    INVALID_PRODUCER_ID_MAPPING = 49
    INVALID_TRANSACTION_TIMEOUT = 50
    CONCURRENT_TRANSACTIONS = 51
    TRANSACTION_COORDINATOR_FENCED = 52
    TRANSACTIONAL_ID_AUTHORIZATION_FAILED = 53
    SECURITY_DISABLED = 54
    OPERATION_NOT_ATTEMPTED = 55
    KAFKA_STORAGE_ERROR = 56
    LOG_DIR_NOT_FOUND = 57
    SASL_AUTHENTICATION_FAILED = 58
    UNKNOWN_PRODUCER_ID = 59
    REASSIGNMENT_IN_PROGRESS = 60
    DELEGATION_TOKEN_AUTH_DISABLED = 61
    DELEGATION_TOKEN_NOT_FOUND = 62
    DELEGATION_TOKEN_OWNER_MISMATCH = 63
    DELEGATION_TOKEN_REQUEST_NOT_ALLOWED = 64
    DELEGATION_TOKEN_AUTHORIZATION_FAILED = 65
    DELEGATION_TOKEN_EXPIRED = 66
    INVALID_PRINCIPAL_TYPE = 67
    NON_EMPTY_GROUP = 68
    GROUP_ID_NOT_FOUND = 69
    FETCH_SESSION_ID_NOT_FOUND = 70
    INVALID_FETCH_SESSION_EPOCH = 71
    LISTENER_NOT_FOUND = 72
    TOPIC_DELETION_DISABLED = 73
    FENCED_LEADER_EPOCH = 74
    UNKNOWN_LEADER_EPOCH = 75
    UNSUPPORTED_COMPRESSION_TYPE = 76
    STALE_BROKER_EPOCH = 77
    OFFSET_NOT_AVAILABLE = 78
    MEMBER_ID_REQUIRED = 79
    PREFERRED_LEADER_NOT_AVAILABLE = 80
    GROUP_MAX_SIZE_REACHED = 81
    FENCED_INSTANCE_ID = 82
    ELIGIBLE_LEADERS_NOT_AVAILABLE = 83
    ELECTION_NOT_NEEDED = 84
    NO_REASSIGNMENT_IN_PROGRESS = 85
    GROUP_SUBSCRIBED_TO_TOPIC = 86
    INVALID_RECORD = 87
    UNSTABLE_OFFSET_COMMIT = 88
    THROTTLING_QUOTA_EXCEEDED = 89
    PRODUCER_FENCED = 90
    RESOURCE_NOT_FOUND = 91
    DUPLICATE_RESOURCE = 92
    UNACCEPTABLE_CREDENTIAL = 93
    INCONSISTENT_VOTER_SET = 94
    INVALID_UPDATE_VERSION = 95
    FEATURE_UPDATE_FAILED = 96
    PRINCIPAL_DESERIALIZATION_FAILURE = 97
    SNAPSHOT_NOT_FOUND = 98
    POSITION_OUT_OF_RANGE = 99
    UNKNOWN_TOPIC_ID = 100
    DUPLICATE_BROKER_REGISTRATION = 101
    BROKER_ID_NOT_REGISTERED = 102
    INCONSISTENT_TOPIC_ID = 103
    INCONSISTENT_CLUSTER_ID = 104
    TRANSACTIONAL_ID_NOT_FOUND = 105
    FETCH_SESSION_TOPIC_ID_ERROR = 106
    INELIGIBLE_REPLICA = 107
    NEW_LEADER_ELECTED = 108
    OFFSET_MOVED_TO_TIERED_STORAGE = 109
    FENCED_MEMBER_EPOCH = 110
    UNRELEASED_INSTANCE_ID = 111
    UNSUPPORTED_ASSIGNOR = 112
    STALE_MEMBER_EPOCH = 113
    MISMATCHED_ENDPOINT_TYPE = 114
    UNSUPPORTED_ENDPOINT_TYPE = 115
    UNKNOWN_CONTROLLER_ID = 116
    UNKNOWN_SUBSCRIPTION_ID = 117
    TELEMETRY_TOO_LARGE = 118
    INVALID_REGISTRATION = 119
    TRANSACTION_ABORTABLE = 120
    INVALID_RECORD_STATE = 121
    SHARE_SESSION_NOT_FOUND = 122
    INVALID_SHARE_SESSION_EPOCH = 123
    FENCED_STATE_EPOCH = 124
    INVALID_VOTER_KEY = 125
    DUPLICATE_VOTER = 126
    VOTER_NOT_FOUND = 127
    INVALID_REGULAR_EXPRESSION = 128
    REBOOTSTRAP_REQUIRED = 129
    STREAMS_INVALID_TOPOLOGY = 130
    STREAMS_INVALID_TOPOLOGY_EPOCH = 131
    STREAMS_TOPOLOGY_FENCED = 132
    SHARE_SESSION_LIMIT_REACHED = 133


# code -> (retriable, default message)
_INFO: dict[int, tuple[bool, str]] = {
    -1: (False, 'Unexpected failure on the broker with no better code.'),
    0: (False, 'Success.'),
    1: (False, 'The fetch or list offset is outside [log start, log end] for the partition.'),
    2: (True, 'The record batch failed validation: bad CRC, wrong size, null key on a compacted topic, and so on.'),
    3: (True, 'This broker has no such topic or partition; the client may have stale metadata.'),
    4: (False, 'Fetch max-bytes value is not valid.'),
    5: (True, 'The partition has no leader at the moment, e.g. during an election.'),
    6: (True, 'This broker is not the leader (or, for replica requests, not a replica) of the partition.'),
    7: (True, 'The request did not finish in time, e.g. the acks=all wait or a controller wait expired.'),
    8: (False, 'The broker is not available (legacy code, rarely sent).'),
    9: (True, 'A replica is not available, e.g. in Metadata when some replicas are offline.'),
    10: (False, 'A record or batch is larger than the broker or topic max message size.'),
    11: (False, 'The request carried an older controller epoch than the broker has seen (ZK controller fencing).'),
    12: (False, 'The metadata string in an offset commit is longer than offset.metadata.max.bytes.'),
    13: (True, 'The connection dropped before a response arrived (client-side code).'),
    14: (True, 'The group or transaction coordinator is still loading its state from the internal topic.'),
    15: (True, 'The coordinator is not available; e.g. the offsets or transaction topic partition has no leader yet.'),
    16: (True, 'This broker is not the coordinator for the group or transactional id.'),
    17: (False, 'The topic name is not valid, or the operation is not allowed on this (internal) topic.'),
    18: (False, 'The batch is larger than the segment size, so it can never be stored.'),
    19: (True, 'With acks=all, the ISR is smaller than min.insync.replicas, so the write was refused.'),
    20: (True, 'The write reached the log, but the ISR shrank below min.insync.replicas before the acks were met.'),
    21: (False, 'The acks value is not -1, 0 or 1.'),
    22: (False, 'The group generation in the request is not the current one.'),
    23: (False, 'The member protocols do not match the group, or the protocol type is empty.'),
    24: (False, 'The group id is empty or not valid.'),
    25: (False, 'The coordinator does not know this member id.'),
    26: (False, 'The session timeout is outside group.min/max.session.timeout.ms.'),
    27: (False, 'The group is rebalancing; the member must rejoin.'),
    28: (False, 'The commit data size is not valid (legacy).'),
    29: (False, 'The principal may not access this topic.'),
    30: (False, 'The principal may not access this group.'),
    31: (False, 'The principal lacks the cluster-level permission this request needs.'),
    32: (False, 'A record timestamp is outside the allowed window (message.timestamp.*.max.ms).'),
    33: (False, 'The SASL mechanism asked for is not enabled on this listener.'),
    34: (False, 'The request is not allowed in the current SASL state.'),
    35: (False, 'The broker does not support this API version.'),
    36: (False, 'The topic name is already taken.'),
    37: (False, 'The partition count is not valid (e.g. below 1, or not larger than now for CreatePartitions).'),
    38: (False, 'The replication factor is below 1 or above the number of live brokers.'),
    39: (False, 'The manual replica assignment is not valid.'),
    40: (False, 'A config name or value is not valid.'),
    41: (True, 'This broker is not the controller; send the request to the controller.'),
    42: (False, 'The request is malformed or makes no sense for this broker; see the broker log.'),
    43: (False, 'The topic message format is too old for this request (e.g. transactions need v2).'),
    44: (False, 'A create-topic or alter-config policy rejected the request.'),
    45: (False, 'The producer sequence number has a gap; data may have been lost.'),
    46: (False, 'A batch with this sequence was already written; the broker drops it as a duplicate.'),
    47: (False, "The producer epoch is older than the broker's."),
    48: (False, 'The transactional operation is not valid in the current transaction state.'),
    49: (False, 'The producer id is not mapped to this transactional id (e.g. it expired).'),
    50: (False, 'The transaction timeout is above transaction.max.timeout.ms.'),
    51: (True, 'Another operation on the same transaction is still in progress; retry later.'),
    52: (False, 'The transaction coordinator that sent WriteTxnMarkers has been replaced (stale coordinator epoch).'),
    53: (False, 'The principal may not use this transactional id.'),
    54: (False, 'Security features (e.g. ACLs) are not enabled on the broker.'),
    55: (False, 'The broker skipped this item because another part of a batched request failed.'),
    56: (True, 'A disk error happened while reading or writing the log (offline log dir).'),
    57: (False, 'The log directory named in the request is not configured on the broker.'),
    58: (False, 'The SASL exchange failed, e.g. wrong password.'),
    59: (False, 'The broker has no state for this producer id, e.g. because retention or expiry removed it.'),
    60: (False, 'A partition reassignment is already running for this partition.'),
    61: (False, 'Delegation tokens are not enabled.'),
    62: (False, 'There is no delegation token with this id or HMAC.'),
    63: (False, 'The principal is not the owner or a renewer of the token.'),
    64: (False, 'Token requests are not allowed on this kind of connection (plaintext, 1-way SSL, or token-authenticated).'),
    65: (False, 'The principal may not perform this token operation.'),
    66: (False, 'The token is past its expiry time.'),
    67: (False, 'The principal type is not supported.'),
    68: (False, 'The group still has members, so it cannot be deleted.'),
    69: (False, 'There is no group with this id.'),
    70: (True, 'There is no incremental fetch session with this id; start a new one.'),
    71: (True, 'The fetch session epoch does not match what the broker expects.'),
    72: (True, 'The leader has no endpoint on the listener that served the metadata request.'),
    73: (False, 'The cluster has delete.topic.enable=false.'),
    74: (True, "The leader epoch in the request is older than the broker's; refresh metadata."),
    75: (True, 'The leader epoch in the request is newer than the broker knows; retry later.'),
    76: (False, "The client cannot read the partition's compression type (e.g. zstd with an old fetch version)."),
    77: (False, 'The broker epoch in the request is stale (ZK broker epoch = czxid of its registration).'),
    78: (True, 'The leader cannot yet answer this offset query; its high watermark lags after an election.'),
    79: (False, 'A first JoinGroup must be retried with the member id the broker just assigned.'),
    80: (True, 'The preferred leader is not in the ISR or not alive, so it cannot be elected.'),
    81: (False, 'The group already has group.max.size members.'),
    82: (False, 'Another member with the same group.instance.id has replaced this one (static membership).'),
    83: (True, 'No replica that can be elected leader is available.'),
    84: (True, 'The preferred replica is already leader; nothing to do.'),
    85: (False, 'No reassignment is running for this partition.'),
    86: (False, 'Offsets cannot be deleted while the group still subscribes to the topic.'),
    87: (False, 'A record failed broker-side checks (e.g. missing key on a compacted topic, bad headers).'),
    88: (True, 'There are pending transactional offsets for the group; retry later (require_stable).'),
    89: (True, 'The controller mutation quota is used up; retry after the throttle time.'),
    90: (False, 'A newer producer with the same transactional id has fenced this one.'),
    91: (False, 'The request names a resource that does not exist.'),
    92: (False, 'The request names the same resource twice.'),
    93: (False, 'The SCRAM credential does not meet the requirements (e.g. too few iterations).'),
    94: (False, 'KRaft: sender or receiver is not one of the expected voters.'),
    95: (False, 'The feature update version is not valid.'),
    96: (False, 'Finalizing the feature update failed unexpectedly on the broker.'),
    97: (False, 'A forwarded request carried a principal that could not be deserialized.'),
    98: (False, 'KRaft: the requested snapshot does not exist.'),
    99: (False, 'KRaft: the snapshot position is negative or past its end.'),
    100: (True, 'This broker does not host a topic with this topic id.'),
    101: (False, 'KRaft: another broker has already registered this broker id.'),
    102: (False, 'KRaft: this broker id is not registered.'),
    103: (True, 'The topic id in the request does not match the one in the log (partition.metadata).'),
    104: (False, 'The cluster id in the request does not match this cluster.'),
    105: (False, 'There is no transaction state for this transactional id.'),
    106: (True, 'The fetch session mixed topic ids and names in ways that do not fit.'),
    107: (False, 'The new ISR in AlterPartition contains a replica that may not join (fenced, shutting down, or offline).'),
    108: (False, 'AlterPartition succeeded, but leadership moved at the same time.'),
    109: (False, 'The offset is no longer in local storage; it is only in tiered (remote) storage.'),
    110: (False, 'KIP-848: the member epoch is fenced; the member must drop its partitions and rejoin.'),
    111: (False, 'KIP-848: the static instance id is still held by another member.'),
    112: (False, 'KIP-848: the assignor (or its version range) is not supported.'),
    113: (False, 'KIP-848: the member epoch is stale; retry with the epoch from the last heartbeat.'),
    114: (False, 'The request reached the wrong type of endpoint (broker vs controller).'),
    115: (False, 'This endpoint type is not supported yet.'),
    116: (False, 'This controller id is not known.'),
    117: (False, 'KIP-714: the telemetry subscription id is invalid or out of date.'),
    118: (False, 'KIP-714: the telemetry push is larger than the broker accepts.'),
    119: (False, 'KRaft: the controller judged the broker registration invalid.'),
    120: (False, 'KIP-890: something went wrong in the transaction; the client may abort and keep using its transactional id.'),
    121: (False, 'KIP-932: the record state is invalid, so the delivery acknowledgement failed.'),
    122: (True, 'KIP-932: the share session was not found.'),
    123: (True, 'KIP-932: the share session epoch is invalid.'),
    124: (False, 'KIP-932: the share-group state epoch does not match.'),
    125: (False, 'KRaft (KIP-853): the voter key does not match the receiver.'),
    126: (False, 'KRaft (KIP-853): the voter is already in the voter set.'),
    127: (False, 'KRaft (KIP-853): the voter is not in the voter set.'),
    128: (False, 'KIP-848 regex subscription: the regular expression is not valid.'),
    129: (False, "The client's metadata is too stale; it should re-bootstrap (KIP-1102)."),
    130: (False, 'KIP-1071 streams groups.'),
    131: (False, 'KIP-1071.'),
    132: (False, 'KIP-1071.'),
    133: (False, 'KIP-932.'),
}


def is_retriable(code: int) -> bool:
    """Whether Kafka's clients retry a request that failed with ``code``."""
    info = _INFO.get(int(code))
    return info[0] if info is not None else False


def error_message(code: int) -> str:
    info = _INFO.get(int(code))
    return info[1] if info is not None else f"Unknown error code {int(code)}."


class KafkaApiError(Exception):
    """A request failed with a Kafka error code; handlers raise it, the broker answers with it."""

    def __init__(self, error: Errors | int, message: str | None = None) -> None:
        self.error = Errors(error)
        self.message = message if message is not None else error_message(self.error)
        super().__init__(f"{self.error.name} ({int(self.error)}): {self.message}")
