"""Which APIs and versions this broker serves (Kafka's ApiVersionManager for a ZK broker).

The network layer asks ``is_api_enabled`` for every request, and closes the connection
when it says no; the ApiVersions handler reports ``enabled_apis``. ApiVersions itself is
accepted at any version, because a client sends its newest one and expects an
UNSUPPORTED_VERSION answer it can read, not a closed socket.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from protocol.api_keys import API_SPECS, ApiKey
from protocol.errors import Errors
from protocol.exceptions import ProtocolError
from protocol.messages import ApiVersionsResponse, Message

ZK_BROKER_LISTENER = "zkBroker"


class ApiVersionManager:
    def __init__(self, enable_unstable_last_version: bool = False, listener_type: str = ZK_BROKER_LISTENER) -> None:
        self.listener_type = listener_type
        self._ranges: dict[int, tuple[int, int]] = {}
        for key, spec in API_SPECS.items():
            if listener_type not in spec.listeners:
                continue
            top = spec.max_version
            if spec.latest_version_unstable and not enable_unstable_last_version:
                top -= 1
            if top >= spec.min_version:
                self._ranges[int(key)] = (spec.min_version, top)
        self._answer_entries: list[Message] | None = None
        # The finalized features in /feature and their epoch (its zkVersion), as the broker's
        # FinalizedFeatureChangeListener last read them; a ZK broker supports no feature itself.
        self.finalized_features_epoch = -1
        self.finalized_features: dict[str, int] = {}
        # Features this broker supports, name -> (min, max) version (share.version while share groups are on).
        self.supported_features: dict[str, tuple[int, int]] = {}

    def set_finalized_features(self, epoch: int, features: dict[str, int]) -> None:
        self.finalized_features, self.finalized_features_epoch = dict(features), epoch

    def version_range(self, api_key: int) -> tuple[int, int] | None:
        """(min, max) served for this api key, None if the broker does not serve it."""
        return self._ranges.get(api_key)

    def is_api_enabled(self, api_key: int, api_version: int) -> bool:
        served = self._ranges.get(api_key)
        if served is None:
            return False
        if api_key == ApiKey.API_VERSIONS:
            return True
        return served[0] <= api_version <= served[1]

    def enabled_apis(self) -> list[tuple[ApiKey, int, int]]:
        """(api key, min version, max version) for the ApiVersions response, by key."""
        return [(ApiKey(key), lo, hi) for key, (lo, hi) in sorted(self._ranges.items())]

    def answer_entries(self) -> list[Message]:
        """``enabled_apis`` as the ApiVersions response lists them, built on first use (every
        connection's first request asks; building them took 57 µs of its 72). The handlers are
        all registered by the time a broker answers requests."""
        if self._answer_entries is None:
            self._answer_entries = [ApiVersionsResponse.ApiVersion(api_key=int(key), min_version=lo, max_version=hi)
                                    for key, lo, hi in self.enabled_apis()]
        return self._answer_entries


# ApiVersionsRequest.isValid: client software name and version from v3 on.
_SOFTWARE = re.compile(r"^[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?$")


def api_versions_answer(manager: ApiVersionManager, version: int, body: Callable[[], Message]
                        ) -> tuple[Message, int]:
    """The ApiVersions response and the version to encode it at (KafkaApis and, before SASL
    authentication, the SaslServerAuthenticator answer alike)."""
    low, high = manager.version_range(ApiKey.API_VERSIONS) or (0, 0)
    if not low <= version <= high:
        # A newer client: answer in v0 so it can read that it must retry with a version we know.
        return ApiVersionsResponse(
            error_code=int(Errors.UNSUPPORTED_VERSION),
            api_keys=[ApiVersionsResponse.ApiVersion(api_key=int(ApiKey.API_VERSIONS), min_version=low,
                                                     max_version=high)],
        ), 0
    try:
        request = body()
    except ProtocolError:
        return ApiVersionsResponse(error_code=int(Errors.INVALID_REQUEST)), version
    if version >= 3 and not (_SOFTWARE.match(request.client_software_name)
                             and _SOFTWARE.match(request.client_software_version)):
        return ApiVersionsResponse(error_code=int(Errors.INVALID_REQUEST)), version
    features = manager.finalized_features
    return ApiVersionsResponse(
        error_code=0, api_keys=manager.answer_entries(), finalized_features_epoch=manager.finalized_features_epoch,
        supported_features=[ApiVersionsResponse.SupportedFeatureKey(name=name, min_version=low, max_version=high)
                            for name, (low, high) in sorted(manager.supported_features.items())],
        finalized_features=[ApiVersionsResponse.FinalizedFeatureKey(name=name, max_version_level=level,
                                                                    min_version_level=level)
                            for name, level in sorted(features.items())]), version
