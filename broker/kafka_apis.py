"""KafkaApis: routes each request to its registered handler (Kafka's KafkaApis.handle).

Handlers live in ``broker.handlers`` and register by API key. This module parses the body
(a body that does not parse closes the connection, as Kafka's request parser does), dispatches,
and turns whatever the handler raises, including a response that cannot be encoded, into the
API's error response (``broker.handlers.failure_response``): only that one request fails.

The share-group APIs that wait for other requests this broker's own handler pool serves run
beside the pool's workers, as parked requests (``DETACHED_APIS``).
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Protocol

from broker.handlers import HANDLERS, error_response, failure_response
from broker.network.api_version_manager import ApiVersionManager
from broker.network.request_channel import Request, Response
from protocol.api_keys import ApiKey
from protocol.exceptions import ProtocolError

if TYPE_CHECKING:
    from broker.services import BrokerServices

log = logging.getLogger(__name__)


class HasServices(Protocol):
    services: BrokerServices | None  # set once the server has built its components


# ShareFetch and ShareAcknowledge wait for the share-group state RPCs, whose share coordinator may
# be this broker, and those wait for the followers' fetches of __share_group_state. Handled by a
# worker, each would hold it meanwhile: with num.io.threads of them waiting (16 share consumers on
# one broker), nothing was left to serve what they wait for, until the persister timed out. Kafka's
# handlers complete these requests later, from other threads; here they run as tasks beside the
# workers and send their response when done, as a parked request does.
DETACHED_APIS: frozenset[int] = frozenset({
    ApiKey.SHARE_FETCH, ApiKey.SHARE_ACKNOWLEDGE, ApiKey.INITIALIZE_SHARE_GROUP_STATE,
    ApiKey.READ_SHARE_GROUP_STATE, ApiKey.WRITE_SHARE_GROUP_STATE, ApiKey.DELETE_SHARE_GROUP_STATE,
    ApiKey.READ_SHARE_GROUP_STATE_SUMMARY,
})


class KafkaApis:
    """The handler function of the KafkaRequestHandlerPool."""

    def __init__(self, server: HasServices) -> None:
        self.server = server
        self._detached: set[asyncio.Task[None]] = set()

    async def __call__(self, request: Request) -> Response | None:
        handler = HANDLERS.get(request.api_key)  # keyed by ApiKey, an IntEnum: the int finds it
        if handler is None:
            log.warning("Closing connection %s: no handler for api key %d", request.connection_id, request.api_key)
            return Response.close(request)
        try:
            if request.api_key != ApiKey.API_VERSIONS:  # it answers versions and bodies it cannot read itself
                request.body()
        except ProtocolError as exc:
            log.warning("Closing connection %s: cannot parse the body of %r: %s", request.connection_id,
                        request.header, exc)
            return Response.close(request)
        services = self.server.services
        assert services is not None, "requests are served only after startup built the services"
        try:
            denied = services.auth.check_request(request)
            if denied is not None:
                return error_response(request, denied)
            if request.api_key in DETACHED_APIS:
                task = asyncio.get_running_loop().create_task(self._run_detached(handler, services, request))
                self._detached.add(task)
                task.add_done_callback(self._detached.discard)
                return None
            return await handler(services, request)
        except Exception as exc:
            return failure_response(request, exc)

    @staticmethod
    async def _run_detached(handler, services: BrokerServices, request: Request) -> None:  # type: ignore[no-untyped-def]
        try:
            response = await handler(services, request)
        except Exception as exc:
            response = failure_response(request, exc)
        if response is not None:  # None: the handler parked it and answers itself
            services.request_channel.send_response(response)


# The APIs of each group protocol that group.coordinator.rebalance.protocols can leave out.
PROTOCOL_APIS: dict[str, frozenset[int]] = {
    "consumer": frozenset({ApiKey.CONSUMER_GROUP_HEARTBEAT, ApiKey.CONSUMER_GROUP_DESCRIBE}),
}
SHARE_VERSION = "share.version"
# The share-group APIs (KIP-932); with group.share.enable=false none of them is served.
SHARE_GROUP_APIS: frozenset[int] = frozenset({
    ApiKey.SHARE_GROUP_HEARTBEAT, ApiKey.SHARE_GROUP_DESCRIBE, ApiKey.SHARE_FETCH, ApiKey.SHARE_ACKNOWLEDGE,
    ApiKey.INITIALIZE_SHARE_GROUP_STATE, ApiKey.READ_SHARE_GROUP_STATE, ApiKey.WRITE_SHARE_GROUP_STATE,
    ApiKey.DELETE_SHARE_GROUP_STATE, ApiKey.READ_SHARE_GROUP_STATE_SUMMARY, ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS,
    ApiKey.ALTER_SHARE_GROUP_OFFSETS, ApiKey.DELETE_SHARE_GROUP_OFFSETS,
})


def disabled_apis(rebalance_protocols: list[str]) -> frozenset[int]:
    """The APIs of the group protocols the broker is configured not to serve (Kafka 4's rule)."""
    return frozenset().union(*(apis for protocol, apis in PROTOCOL_APIS.items() if protocol not in rebalance_protocols))


class RegisteredApiVersionManager(ApiVersionManager):
    """Serves only the APIs that have a registered handler and are not switched off, so ApiVersions
    never advertises more."""

    def __init__(self, enable_unstable_last_version: bool = False, disabled: frozenset[int] = frozenset()) -> None:
        super().__init__(enable_unstable_last_version)
        self.disabled = disabled
        self.supported_features[SHARE_VERSION] = (0, 1)  # Kafka 4.2's range
        self.set_finalized_features(self.finalized_features_epoch, self.finalized_features)

    def set_finalized_features(self, epoch: int, features: dict[str, int]) -> None:
        """/feature's finalized features, and share.version at 1 while share groups are served
        (Kafka 4.2 finalizes it; a feature at level 0 is not listed)."""
        share = {SHARE_VERSION: 1} if ApiKey.SHARE_GROUP_HEARTBEAT not in self.disabled else {}
        super().set_finalized_features(epoch, {**features, **share})

    def _served(self, api_key: int) -> bool:
        return api_key in HANDLERS and api_key not in self.disabled

    def version_range(self, api_key: int) -> tuple[int, int] | None:
        return super().version_range(api_key) if self._served(api_key) else None

    def is_api_enabled(self, api_key: int, api_version: int) -> bool:
        return self._served(api_key) and super().is_api_enabled(api_key, api_version)

    def enabled_apis(self) -> list[tuple[ApiKey, int, int]]:
        return [entry for entry in super().enabled_apis() if self._served(entry[0])]
