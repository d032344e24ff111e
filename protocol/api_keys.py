"""Kafka API keys, their version ranges, and header-version rules.

``API_SPECS`` comes from the bundled request schemas, so it always matches the
codecs. Header versions follow Kafka's rules, with its two exceptions:
ControlledShutdown v0 uses request header v0 (no client id), and the ApiVersions
response always uses response header v0 so any client can read it.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum

from protocol.exceptions import ProtocolError
from protocol.messages import Message, message_class
from protocol.schema import Versions, load_raw, schema_names


class ApiKey(IntEnum):
    PRODUCE = 0
    FETCH = 1
    LIST_OFFSETS = 2
    METADATA = 3
    LEADER_AND_ISR = 4
    STOP_REPLICA = 5
    UPDATE_METADATA = 6
    CONTROLLED_SHUTDOWN = 7
    OFFSET_COMMIT = 8
    OFFSET_FETCH = 9
    FIND_COORDINATOR = 10
    JOIN_GROUP = 11
    HEARTBEAT = 12
    LEAVE_GROUP = 13
    SYNC_GROUP = 14
    DESCRIBE_GROUPS = 15
    LIST_GROUPS = 16
    SASL_HANDSHAKE = 17
    API_VERSIONS = 18
    CREATE_TOPICS = 19
    DELETE_TOPICS = 20
    DELETE_RECORDS = 21
    INIT_PRODUCER_ID = 22
    OFFSET_FOR_LEADER_EPOCH = 23
    ADD_PARTITIONS_TO_TXN = 24
    ADD_OFFSETS_TO_TXN = 25
    END_TXN = 26
    WRITE_TXN_MARKERS = 27
    TXN_OFFSET_COMMIT = 28
    DESCRIBE_ACLS = 29
    CREATE_ACLS = 30
    DELETE_ACLS = 31
    DESCRIBE_CONFIGS = 32
    ALTER_CONFIGS = 33
    ALTER_REPLICA_LOG_DIRS = 34
    DESCRIBE_LOG_DIRS = 35
    SASL_AUTHENTICATE = 36
    CREATE_PARTITIONS = 37
    CREATE_DELEGATION_TOKEN = 38
    RENEW_DELEGATION_TOKEN = 39
    EXPIRE_DELEGATION_TOKEN = 40
    DESCRIBE_DELEGATION_TOKEN = 41
    DELETE_GROUPS = 42
    ELECT_LEADERS = 43
    INCREMENTAL_ALTER_CONFIGS = 44
    ALTER_PARTITION_REASSIGNMENTS = 45
    LIST_PARTITION_REASSIGNMENTS = 46
    OFFSET_DELETE = 47
    DESCRIBE_CLIENT_QUOTAS = 48
    ALTER_CLIENT_QUOTAS = 49
    DESCRIBE_USER_SCRAM_CREDENTIALS = 50
    ALTER_USER_SCRAM_CREDENTIALS = 51
    VOTE = 52
    BEGIN_QUORUM_EPOCH = 53
    END_QUORUM_EPOCH = 54
    DESCRIBE_QUORUM = 55
    ALTER_PARTITION = 56
    UPDATE_FEATURES = 57
    ENVELOPE = 58
    FETCH_SNAPSHOT = 59
    DESCRIBE_CLUSTER = 60
    DESCRIBE_PRODUCERS = 61
    BROKER_REGISTRATION = 62
    BROKER_HEARTBEAT = 63
    UNREGISTER_BROKER = 64
    DESCRIBE_TRANSACTIONS = 65
    LIST_TRANSACTIONS = 66
    ALLOCATE_PRODUCER_IDS = 67
    CONSUMER_GROUP_HEARTBEAT = 68
    CONSUMER_GROUP_DESCRIBE = 69
    CONTROLLER_REGISTRATION = 70
    GET_TELEMETRY_SUBSCRIPTIONS = 71
    PUSH_TELEMETRY = 72
    ASSIGN_REPLICAS_TO_DIRS = 73
    LIST_CLIENT_METRICS_RESOURCES = 74
    DESCRIBE_TOPIC_PARTITIONS = 75
    SHARE_GROUP_HEARTBEAT = 76
    SHARE_GROUP_DESCRIBE = 77
    SHARE_FETCH = 78
    SHARE_ACKNOWLEDGE = 79
    ADD_RAFT_VOTER = 80
    REMOVE_RAFT_VOTER = 81
    UPDATE_RAFT_VOTER = 82
    INITIALIZE_SHARE_GROUP_STATE = 83
    READ_SHARE_GROUP_STATE = 84
    WRITE_SHARE_GROUP_STATE = 85
    DELETE_SHARE_GROUP_STATE = 86
    READ_SHARE_GROUP_STATE_SUMMARY = 87
    STREAMS_GROUP_HEARTBEAT = 88
    STREAMS_GROUP_DESCRIBE = 89
    DESCRIBE_SHARE_GROUP_OFFSETS = 90
    ALTER_SHARE_GROUP_OFFSETS = 91
    DELETE_SHARE_GROUP_OFFSETS = 92


@dataclass(frozen=True, slots=True)
class ApiSpec:
    api_key: ApiKey
    name: str  # e.g. "Produce"; the messages are f"{name}Request" / f"{name}Response"
    min_version: int
    max_version: int
    flexible_min: int | None  # first flexible version, None if never flexible
    listeners: frozenset[str]
    latest_version_unstable: bool


def _load_specs() -> dict[ApiKey, ApiSpec]:
    specs = {}
    for name in schema_names():
        raw = load_raw(name)
        if raw["type"] != "request":
            continue
        valid = Versions.parse(raw["validVersions"])
        flexible = Versions.parse(raw["flexibleVersions"])
        key = ApiKey(raw["apiKey"])
        specs[key] = ApiSpec(
            api_key=key, name=name[: -len("Request")], min_version=valid.lo, max_version=valid.hi,
            flexible_min=None if flexible.empty else flexible.lo,
            listeners=frozenset(raw.get("listeners", ())),
            latest_version_unstable=bool(raw.get("latestVersionUnstable", False)),
        )
    return dict(sorted(specs.items()))


API_SPECS: dict[ApiKey, ApiSpec] = _load_specs()

# First flexible version per api key (2**16 if never); headers.py reads it per request.
FIRST_FLEXIBLE_VERSION: dict[int, int] = {
    int(k): (s.flexible_min if s.flexible_min is not None else 1 << 16) for k, s in API_SPECS.items()
}


def _flexible_min(api_key: int) -> int:
    try:
        return FIRST_FLEXIBLE_VERSION[api_key]
    except KeyError:
        raise ProtocolError(f"unknown api key {api_key}") from None


def request_header_version(api_key: int, version: int) -> int:
    """Request header version (0, 1 or 2) for a request of this api key and version.

    Like Kafka, versions above the known maximum still follow the flexible rule, so a
    newer client's ApiVersions request can be parsed.
    """
    if api_key == ApiKey.CONTROLLED_SHUTDOWN and version == 0:
        return 0
    return 2 if version >= _flexible_min(api_key) else 1


def response_header_version(api_key: int, version: int) -> int:
    """Response header version (0 or 1); ApiVersions responses always use 0."""
    if api_key == ApiKey.API_VERSIONS:
        return 0
    return 1 if version >= _flexible_min(api_key) else 0


_REQUEST_CLASSES: dict[int, type[Message]] = {}
_RESPONSE_CLASSES: dict[int, type[Message]] = {}


def request_class(api_key: int) -> type[Message]:
    """The request message class of an API key (raises ValueError for an unknown key); every
    request asks, so each is looked up once."""
    cls = _REQUEST_CLASSES.get(api_key)
    if cls is None:
        cls = _REQUEST_CLASSES[api_key] = message_class(API_SPECS[ApiKey(api_key)].name + "Request")
    return cls


def response_class(api_key: int) -> type[Message]:
    cls = _RESPONSE_CLASSES.get(api_key)
    if cls is None:
        cls = _RESPONSE_CLASSES[api_key] = message_class(API_SPECS[ApiKey(api_key)].name + "Response")
    return cls
