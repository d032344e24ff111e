"""Delegation tokens in ZooKeeper, as Kafka's DelegationTokenManagerZk keeps them.

``/delegation_token/tokens/<tokenId>`` holds a token's information as JSON version 3 (principals
sanitized as entity names are; a sensitive path, not world-readable with ``zookeeper.set.acl``);
``/delegation_token/token_changes/token_change_<seq>`` holds a changed or removed token's id, so
that every broker re-reads it. The HMAC is never stored: brokers share the secret key.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kazoo.exceptions import NoNodeError

from coordination.errors import MalformedZnodeError
from coordination.kafka_zk_client import KafkaZkClient
from coordination.zk_admin_data import desanitize, sanitize
from coordination.zk_data import kafka_json, parse_json_object, require

TOKENS_PATH = "/delegation_token/tokens"
TOKEN_CHANGES_PATH = "/delegation_token/token_changes"
TOKEN_CHANGE_PREFIX = "token_change_"
CURRENT_VERSION = 3


@dataclass
class TokenInformation:
    """Kafka's TokenInformation; principals as ``Type:name``."""

    token_id: str
    owner: str
    token_requester: str
    renewers: list[str] = field(default_factory=list)
    issue_timestamp: int = -1
    max_timestamp: int = -1
    expiry_timestamp: int = -1

    def owner_or_renewer(self, principal: str) -> bool:
        return principal == self.owner or principal in self.renewers


def encode_token(token: TokenInformation) -> bytes:
    return kafka_json({"version": CURRENT_VERSION, "owner": sanitize(token.owner),
                       "tokenRequester": sanitize(token.token_requester),
                       "renewers": [sanitize(r) for r in token.renewers], "issueTimestamp": token.issue_timestamp,
                       "maxTimestamp": token.max_timestamp, "expiryTimestamp": token.expiry_timestamp,
                       "tokenId": token.token_id})


def decode_token(path: str, data: bytes | None) -> TokenInformation:
    value = parse_json_object(path, data)
    version = require(path, value, "version", int, data)
    if not 0 < version <= CURRENT_VERSION:
        raise MalformedZnodeError(path, f"unknown version {version}", data)
    try:
        owner = desanitize(value["owner"])
        return TokenInformation(
            value["tokenId"], owner, desanitize(value["tokenRequester"]) if version >= 3 else owner,
            [desanitize(r) for r in value["renewers"]], int(value["issueTimestamp"]), int(value["maxTimestamp"]),
            int(value["expiryTimestamp"]))
    except (KeyError, TypeError, ValueError) as exc:
        raise MalformedZnodeError(path, f"missing or invalid field {exc}", data) from None


class DelegationTokenStore:
    """The tokens' znodes (blocking calls, off the event loop)."""

    def __init__(self, zk: KafkaZkClient) -> None:
        self.zk = zk

    def create_paths(self) -> None:
        for path in (TOKENS_PATH, TOKEN_CHANGES_PATH):
            self.zk.zk.ensure_persistent_path(path)

    def token_ids(self) -> list[str]:
        return self.zk.get_children(TOKENS_PATH)

    def get(self, token_id: str) -> TokenInformation | None:
        path = f"{TOKENS_PATH}/{token_id}"
        data, stat = self.zk.zk.get_data(path)
        return None if stat is None else decode_token(path, data)

    def put(self, token: TokenInformation) -> None:
        """Write the token and tell every broker (Kafka's setOrCreateDelegationToken + notification)."""
        path = f"{TOKENS_PATH}/{token.token_id}"
        data = encode_token(token)
        if self.zk.zk.exists(path) is None:
            self.zk.zk.create_recursive(path, data)
        else:
            self.zk.zk.set_data(path, data)
        self.notify(token.token_id)

    def delete(self, token_id: str) -> None:
        try:
            self.zk.zk.delete(f"{TOKENS_PATH}/{token_id}")
        except NoNodeError:
            pass
        self.notify(token_id)

    def notify(self, token_id: str) -> None:
        self.zk.zk.create_recursive(f"{TOKEN_CHANGES_PATH}/{TOKEN_CHANGE_PREFIX}", token_id.encode(), sequence=True)
