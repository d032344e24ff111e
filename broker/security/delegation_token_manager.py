"""DelegationTokenManager: Kafka's delegation tokens (KIP-48) in ZooKeeper mode.

Enabled by ``delegation.token.secret.key`` (or the deprecated ``delegation.token.master.key``),
the same on every broker: a token's HMAC is HMAC-SHA512 of its id under that key, so any broker
can authenticate it. Tokens are created, renewed and expired through the four DelegationToken
APIs (``handlers/delegation_tokens.py``), stored in ZooKeeper (``coordination.zk_delegation_tokens``)
and cached here on every broker, refreshed by change notifications. A client authenticates with
SCRAM, the token id as user name, the base64 HMAC as password and the ``tokenauth=true``
extension; the session's principal is the token's owner, marked token-authenticated, and lasts
no longer than the token. Expired tokens are removed every ``delegation.token.expiry.check.interval.ms``.
As Kafka's DelegationTokenManagerZk, including its errors and its time arithmetic.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import logging
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, replace

from broker.config import KafkaConfig
from broker.security.scram import SCRAM_MECHANISMS, ScramCredential
from coordination.kafka_zk_client import KafkaZkClient
from coordination.notification_listener import ZkNodeChangeNotificationListener
from coordination.zk_delegation_tokens import TOKEN_CHANGE_PREFIX, TOKEN_CHANGES_PATH, DelegationTokenStore, \
    TokenInformation
from protocol.errors import Errors

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class _CachedToken:
    info: TokenInformation
    hmac: bytes
    credentials: dict[str, ScramCredential]  # by SCRAM mechanism: the HMAC as the password


def _now_ms() -> int:
    return int(time.time() * 1000)


class DelegationTokenManager:
    def __init__(self, config: KafkaConfig, zk: KafkaZkClient | None, clock_ms: Callable[[], int] = _now_ms) -> None:
        secret = config.get("delegation.token.secret.key") or config.get("delegation.token.master.key")
        self._secret = secret.encode("utf-8") if secret else None
        self.max_lifetime_ms = int(config.get("delegation.token.max.lifetime.ms"))
        self.renew_time_ms = int(config.get("delegation.token.expiry.time.ms"))
        self.check_interval_ms = int(config.get("delegation.token.expiry.check.interval.ms"))
        self._store = DelegationTokenStore(zk) if zk is not None else None
        self._clock_ms = clock_ms
        self._lock = threading.RLock()
        self._tokens: dict[str, _CachedToken] = {}
        self._by_hmac: dict[bytes, str] = {}
        self._listener: ZkNodeChangeNotificationListener | None = None

    @property
    def enabled(self) -> bool:
        """Kafka's tokenAuthEnabled."""
        return self._secret is not None

    # --- lifecycle (blocking: ZooKeeper) -------------------------------------------------------
    def startup(self) -> None:
        if not self.enabled or self._store is None:
            return
        self._store.create_paths()
        token_ids = self._store.token_ids()
        log.info("Loading the token cache. Total token count: %d", len(token_ids))
        for token_id in token_ids:
            self._reload(token_id)
        self._listener = ZkNodeChangeNotificationListener(self._store.zk, TOKEN_CHANGES_PATH, TOKEN_CHANGE_PREFIX,
                                                          self._on_notification)
        self._listener.start()

    def shutdown(self) -> None:
        if self._listener is not None:
            self._listener.close()

    def _on_notification(self, _path: str, data: bytes | None) -> None:
        token_id = (data or b"").decode("utf-8", "replace")
        log.info("Processing Token Notification for tokenId: %s", token_id)
        self._reload(token_id)

    def _reload(self, token_id: str) -> None:
        assert self._store is not None
        try:
            info = self._store.get(token_id)
        except Exception:  # noqa: BLE001 - one unreadable token must not stop the others (Kafka logs it too)
            log.exception("Error while getting Token for tokenId: %s", token_id)
            return
        with self._lock:
            if info is None:
                self._uncache(token_id)
            else:
                self._cache(info)

    # --- the cache ----------------------------------------------------------------------------
    def hmac(self, token_id: str) -> bytes:
        assert self._secret is not None
        return hmac.new(self._secret, token_id.encode("utf-8"), hashlib.sha512).digest()

    def _cache(self, info: TokenInformation) -> None:
        digest = self.hmac(info.token_id)
        password = base64.b64encode(digest).decode()
        previous = self._tokens.get(info.token_id)
        credentials = previous.credentials if previous is not None else {
            name: ScramCredential.from_password(mechanism, password, mechanism.min_iterations)
            for name, mechanism in SCRAM_MECHANISMS.items()}
        self._tokens[info.token_id] = _CachedToken(replace(info), digest, credentials)
        self._by_hmac[digest] = info.token_id

    def _uncache(self, token_id: str) -> None:
        cached = self._tokens.pop(token_id, None)
        if cached is not None:
            self._by_hmac.pop(cached.hmac, None)

    def scram_credential(self, mechanism: str, token_id: str) -> ScramCredential | None:
        """The SCRAM credential a client authenticating with this token must prove."""
        cached = self._tokens.get(token_id)
        return None if cached is None else cached.credentials.get(mechanism)

    def token_owner(self, token_id: str) -> tuple[str, int] | None:
        """(owner principal, expiry timestamp) of a cached token, for its SCRAM login."""
        cached = self._tokens.get(token_id)
        return None if cached is None else (cached.info.owner, cached.info.expiry_timestamp)

    # --- the APIs (blocking: ZooKeeper) ------------------------------------------------------------
    def create(self, owner: str, requester: str, renewers: list[str],
               max_lifetime_ms: int) -> tuple[Errors, TokenInformation | None, bytes]:
        if not self.enabled or self._store is None:
            return Errors.DELEGATION_TOKEN_AUTH_DISABLED, None, b""
        with self._lock:
            token_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()
            issue = self._clock_ms()
            lifetime = self.max_lifetime_ms if max_lifetime_ms <= 0 else min(max_lifetime_ms, self.max_lifetime_ms)
            max_timestamp = issue + lifetime
            info = TokenInformation(token_id, owner, requester, list(renewers), issue, max_timestamp,
                                    min(max_timestamp, issue + self.renew_time_ms))
            self._store.put(info)
            self._cache(info)
            log.info("Created a delegation token: %s for owner: %s", token_id, owner)
            return Errors.NONE, info, self.hmac(token_id)

    def renew(self, principal: str, digest: bytes, renew_period_ms: int) -> tuple[Errors, int]:
        return self._change_expiry(principal, digest, renew_period_ms, renewing=True)

    def expire(self, principal: str, digest: bytes, expiry_period_ms: int) -> tuple[Errors, int]:
        return self._change_expiry(principal, digest, expiry_period_ms, renewing=False)

    def _change_expiry(self, principal: str, digest: bytes, period_ms: int, renewing: bool) -> tuple[Errors, int]:
        if not self.enabled or self._store is None:
            return Errors.DELEGATION_TOKEN_AUTH_DISABLED, -1
        with self._lock:
            token_id = self._by_hmac.get(bytes(digest))
            if token_id is None:
                return Errors.DELEGATION_TOKEN_NOT_FOUND, -1
            info = self._tokens[token_id].info
            now = self._clock_ms()
            if not info.owner_or_renewer(principal):
                return Errors.DELEGATION_TOKEN_OWNER_MISMATCH, -1
            if not renewing and period_ms < 0:  # expire at once
                self._remove(token_id)
                log.info("Token expired for token: %s for owner: %s", token_id, info.owner)
                return Errors.NONE, now
            if info.max_timestamp < now or info.expiry_timestamp < now:
                return Errors.DELEGATION_TOKEN_EXPIRED, -1
            if renewing and period_ms < 0:
                period_ms = self.renew_time_ms
            updated = replace(info, expiry_timestamp=min(info.max_timestamp, now + period_ms))
            self._store.put(updated)
            self._cache(updated)
            log.info("%s for token: %s for owner: %s", "Delegation token renewed" if renewing
                     else "Updated expiry time", token_id, info.owner)
            return Errors.NONE, updated.expiry_timestamp

    def _remove(self, token_id: str) -> None:
        assert self._store is not None
        self._store.delete(token_id)
        self._uncache(token_id)

    def tokens(self) -> list[tuple[TokenInformation, bytes]]:
        """Every cached token with its HMAC (DescribeDelegationToken filters them)."""
        with self._lock:
            return [(replace(cached.info), cached.hmac) for cached in self._tokens.values()]

    def expire_tokens(self) -> None:
        """Kafka's expireTokens: remove every token past its expiry or maximum lifetime."""
        if not self.enabled or self._store is None:
            return
        with self._lock:
            now = self._clock_ms()
            for token_id, cached in list(self._tokens.items()):
                if cached.info.max_timestamp < now or cached.info.expiry_timestamp < now:
                    log.info("Delegation token expired for token: %s for owner: %s", token_id, cached.info.owner)
                    self._remove(token_id)
