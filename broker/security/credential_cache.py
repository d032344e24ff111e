"""CredentialCache: the SCRAM credentials of every user, from ZooKeeper's ``/config/users/<user>``.

Loaded at start-up and refreshed from config change notifications (``users/<user>``), as
Kafka's CredentialProvider is by its DynamicConfigManager; authentication reads only memory.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

from broker.security.scram import SCRAM_MECHANISMS, ScramCredential

log = logging.getLogger(__name__)


class CredentialCache:
    def __init__(self) -> None:
        self._credentials: dict[str, dict[str, ScramCredential]] = {name: {} for name in SCRAM_MECHANISMS}

    def get(self, mechanism: str, username: str) -> ScramCredential | None:
        return self._credentials[mechanism].get(username)

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
