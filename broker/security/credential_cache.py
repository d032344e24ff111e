"""CredentialCache: the SCRAM credentials of every user, from ZooKeeper's ``/config/users/<user>``.

Loaded at start-up and refreshed from config change notifications (``users/<user>``), as
Kafka's CredentialProvider is by its DynamicConfigManager; authentication reads only memory.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING

from broker.security.scram import SCRAM_MECHANISMS, ScramCredential

if TYPE_CHECKING:
    from broker.security.delegation_token_manager import DelegationTokenManager

log = logging.getLogger(__name__)


class CredentialCache:
    def __init__(self) -> None:
        self._credentials: dict[str, dict[str, ScramCredential]] = {name: {} for name in SCRAM_MECHANISMS}
        # Set by the server when delegation tokens are enabled (Kafka's CredentialProvider.tokenCache).
        self.delegation_tokens: DelegationTokenManager | None = None

    def get(self, mechanism: str, username: str) -> ScramCredential | None:
        return self._credentials[mechanism].get(username)

    def token(self, mechanism: str, token_id: str) -> tuple[str, int, ScramCredential] | None:
        """A delegation token's SCRAM login: (owner principal, expiry ms, credential), None if unknown."""
        tokens = self.delegation_tokens
        if tokens is None:
            return None
        owner, credential = tokens.token_owner(token_id), tokens.scram_credential(mechanism, token_id)
        return None if owner is None or credential is None else (owner[0], owner[1], credential)

    def update_user(self, username: str, config: Mapping[str, str]) -> None:
        """Replace ``username``'s credentials with those in its entity config (none: removed)."""
        for mechanism, users in self._credentials.items():
            value = config.get(mechanism)
            if value is None:
                users.pop(username, None)
                continue
            try:
                users[username] = ScramCredential.from_config_value(value)
            except ValueError:
                log.error("Ignoring the malformed %s credential of user %s", mechanism, username)
                users.pop(username, None)
