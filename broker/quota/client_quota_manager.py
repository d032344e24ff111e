"""Client quotas (Kafka's ClientQuotaManager, ClientRequestQuotaManager and DefaultQuotaCallback).

Quotas come from ``/config/users``, ``/config/users/<user>/clients`` and ``/config/clients`` (and
their ``<default>``s). For a request of user U and client id C the most specific quota applies, in
Kafka's order: (U, C), (U, <default>), U, (<default>, C), (<default>, <default>), <default> user,
C, <default> client id. Which of those levels are in use decides what the rate is measured over
(Kafka's metric tags): a user quota is shared by all that user's clients, a client-id quota by all
users of that client id.

``QuotaManagers.on_response`` sees every response before it is sent: it records the produced bytes
(request size) and the handler time (as a percentage of one thread, for ``request_percentage``),
and when a rate is over its bound it sets the response's ``throttle_time_ms`` and has the
connection muted for that long, as Kafka does. A consumer's fetch is recorded by the fetch handler
(``fetch_throttle_ms``) before its response is made: a throttled fetch is answered empty, its bytes
taken back, and a fetch returns at most what the quota allows over its windows, as in Kafka.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Mapping

from broker.network.request_channel import Request, Response
from broker.quota.quota_configs import CONSUMER_BYTE_RATE, CONTROLLER_MUTATION_RATE, PRODUCER_BYTE_RATE, \
    REQUEST_PERCENTAGE
from broker.quota.sampled_rate import SampledRate
from coordination.zk_admin_data import DEFAULT_ENTITY, sanitize
from protocol.api_keys import ApiKey
from protocol.errors import Errors, KafkaApiError

log = logging.getLogger(__name__)

QuotaEntity = tuple[str | None, str | None]  # (sanitized user or <default>, client id or <default>)
# The inter-broker APIs: never throttled (Kafka's sendResponseExemptThrottle).
EXEMPT_APIS = frozenset({ApiKey.LEADER_AND_ISR, ApiKey.STOP_REPLICA, ApiKey.UPDATE_METADATA,
                         ApiKey.CONTROLLED_SHUTDOWN, ApiKey.ALTER_PARTITION, ApiKey.ALLOCATE_PRODUCER_IDS,
                         ApiKey.WRITE_TXN_MARKERS})
INACTIVE_SENSOR_EXPIRY_S = 3600


class ClientQuotaManager:
    """One quota type (produce, fetch or request): bounds per entity, rates per metric tags."""

    def __init__(self, key: str, window_num: int, window_s: float, max_throttle_ms: float | None = None) -> None:
        self.key = key
        self.window_num = window_num
        self.window_s = window_s
        self.max_throttle_ms = max_throttle_ms
        self.quotas: dict[QuotaEntity, float] = {}
        self._sensors: dict[tuple[str, str], SampledRate] = {}
        self._last_purge = 0.0

    @property
    def enabled(self) -> bool:
        return bool(self.quotas)

    def update_quota(self, entity: QuotaEntity, value: float | None) -> None:
        if value is None:
            if self.quotas.pop(entity, None) is not None:
                log.info("Removing %s quota for %s", self.key, entity)
        else:
            log.info("Changing %s quota for %s to %s", self.key, entity, value)
            self.quotas[entity] = value

    def metric_tags(self, user: str, client_id: str) -> tuple[str, str]:
        """What the rate of (user, client id) is measured over (DefaultQuotaCallback.quotaMetricTags)."""
        levels = {(u is not None, c is not None) for u, c in self.quotas}
        if levels <= {(False, True)}:
            return "", client_id
        if levels == {(True, False)}:
            return user, ""
        if levels == {(True, True)}:
            return user, client_id
        quotas = self.quotas
        if (user, client_id) in quotas or (user, DEFAULT_ENTITY) in quotas:
            return user, client_id
        if (user, None) in quotas:
            return user, ""
        if (DEFAULT_ENTITY, client_id) in quotas or (DEFAULT_ENTITY, DEFAULT_ENTITY) in quotas:
            return user, client_id
        if (DEFAULT_ENTITY, None) in quotas:
            return user, ""
        return "", client_id

    def quota_limit(self, tags: tuple[str, str]) -> float | None:
        """The bound for a sensor's tags (DefaultQuotaCallback.quotaLimit)."""
        user, client_id = tags
        quotas = self.quotas
        if user and client_id:
            order: tuple[QuotaEntity, ...] = ((user, client_id), (user, DEFAULT_ENTITY), (DEFAULT_ENTITY, client_id),
                                              (DEFAULT_ENTITY, DEFAULT_ENTITY))
        elif user:
            order = ((user, None), (DEFAULT_ENTITY, None))
        else:
            order = ((None, client_id), (None, DEFAULT_ENTITY))
        return next((quotas[e] for e in order if e in quotas), None)

    def record_and_get_throttle_ms(self, user: str, client_id: str, value: float, now: float) -> int:
        """Record ``value`` and return how long to throttle: the delay that brings the rate back to
        its bound, (rate - bound) / bound * window (Kafka's QuotaUtils.throttleTime)."""
        tags = self.metric_tags(user, client_id)
        sensor = self._sensors.get(tags)
        if sensor is None:
            sensor = self._sensors[tags] = SampledRate(self.window_num, self.window_s)
        sensor.record(value, now)
        self._purge(now)
        bound = self.quota_limit(tags)
        if bound is None or bound <= 0:
            return 0
        throttle_ms = sensor.throttle_s(bound, now) * 1000
        if throttle_ms <= 0:
            return 0
        if self.max_throttle_ms is not None:
            throttle_ms = min(throttle_ms, self.max_throttle_ms)
        return round(throttle_ms)

    def unrecord(self, user: str, client_id: str, value: float, now: float) -> None:
        """Take back a recorded ``value`` (Kafka's unrecordQuotaSensor): a fetch answered empty
        because it was throttled delivered none of the bytes recorded for it."""
        sensor = self._sensors.get(self.metric_tags(user, client_id))
        if sensor is not None:
            sensor.record(-value, now)

    def max_value_in_quota_window(self, user: str, client_id: str) -> float:
        """The most a quota allows over all but one of its windows (Kafka's
        getMaxValueInQuotaWindow): the size bound of one fetch by a quota-bound consumer."""
        if not self.quotas:
            return math.inf
        bound = self.quota_limit(self.metric_tags(user, client_id))
        return math.inf if bound is None else bound * (self.window_num - 1) * self.window_s

    def _purge(self, now: float) -> None:
        if now - self._last_purge < 60:
            return
        self._last_purge = now
        self._sensors = {tags: s for tags, s in self._sensors.items()
                         if now - s.last_record < INACTIVE_SENSOR_EXPIRY_S}


class TokenBucket:
    """Kafka's TokenBucket: ``rate`` tokens a second up to a burst of ``window_num * window_s`` seconds' worth."""

    def __init__(self) -> None:
        self.tokens = math.inf  # full on first use
        self.last_update = 0.0

    def refill(self, rate: float, burst: float, now: float) -> float:
        self.tokens = min(burst, self.tokens + rate * (now - self.last_update))
        self.last_update = now
        return self.tokens


class ControllerMutationQuotaManager(ClientQuotaManager):
    """controller_mutation_rate: partitions created or deleted per second, as a token bucket on the
    controller (Kafka's ControllerMutationQuotaManager)."""

    def __init__(self, window_num: int, window_s: float) -> None:
        super().__init__(CONTROLLER_MUTATION_RATE, window_num, window_s)
        self._buckets: dict[tuple[str, str], TokenBucket] = {}

    def quota_for(self, request: Request, strict: bool) -> ControllerMutationQuota:
        return ControllerMutationQuota(self, sanitize(request.principal.name), request.header.client_id or "", strict)


class ControllerMutationQuota:
    """One request's mutations (Kafka's Strict/PermissiveControllerMutationQuota): strict requests
    (CreateTopics v6+, CreatePartitions v3+, DeleteTopics v5+) refuse a mutation once the bucket is
    empty, with THROTTLING_QUOTA_EXCEEDED; older ones are only throttled afterwards."""

    def __init__(self, manager: ControllerMutationQuotaManager, user: str, client_id: str, strict: bool) -> None:
        self.manager = manager
        self.user, self.client_id = user, client_id
        self.strict = strict
        self.throttle_ms = 0

    def record(self, permits: float) -> None:
        """Count ``permits`` partitions; KafkaApiError(THROTTLING_QUOTA_EXCEEDED) when strict and exhausted."""
        manager = self.manager
        if not manager.enabled:
            return
        tags = manager.metric_tags(self.user, self.client_id)
        rate = manager.quota_limit(tags)
        if rate is None or rate <= 0:
            return
        bucket = manager._buckets.setdefault(tags, TokenBucket())
        now = time.monotonic()
        tokens = bucket.refill(rate, rate * manager.window_num * manager.window_s, now)
        if self.strict and tokens < 0:
            self.throttle_ms = max(self.throttle_ms, round(-tokens / rate * 1000))
            raise KafkaApiError(Errors.THROTTLING_QUOTA_EXCEEDED, "The throttling quota has been exceeded.")
        bucket.tokens -= permits
        if bucket.tokens < 0:
            self.throttle_ms = max(self.throttle_ms, round(-bucket.tokens / rate * 1000))

    def apply(self, response: Response) -> Response:
        """The response, throttled if the mutations went over the quota."""
        if self.throttle_ms > response.throttle_ms:
            response.throttle(self.throttle_ms)
        return response


class QuotaManagers:
    """The produce, fetch and request quotas of one broker, fed from quota entity configs."""

    def __init__(self, window_num: int = 11, window_s: float = 1.0, controller_window_num: int = 11,
                 controller_window_s: float = 1.0) -> None:
        self.produce = ClientQuotaManager(PRODUCER_BYTE_RATE, window_num, window_s)
        self.fetch = ClientQuotaManager(CONSUMER_BYTE_RATE, window_num, window_s)
        # A request-time throttle is at most one window (ClientRequestQuotaManager.maxThrottleTimeMs).
        self.request = ClientQuotaManager(REQUEST_PERCENTAGE, window_num, window_s, window_s * 1000)
        self.controller_mutation = ControllerMutationQuotaManager(controller_window_num, controller_window_s)
        self._managers = (self.produce, self.fetch, self.request, self.controller_mutation)

    def update(self, user: str | None, client_id: str | None, config: Mapping[str, str]) -> None:
        """The quota config of an entity: ``user`` and ``client_id`` are names (``<default>`` for the
        default entity) or None when the entity has no such part (``/config/clients/<c>``: user None)."""
        entity: QuotaEntity = (None if user is None else user if user == DEFAULT_ENTITY else sanitize(user), client_id)
        for manager in self._managers:
            value = config.get(manager.key)
            try:
                manager.update_quota(entity, None if value is None else float(value))
            except ValueError:
                log.error("Ignoring the invalid %s quota %r of %s", manager.key, value, entity)

    def on_response(self, response: Response) -> None:
        """Record the response's request against the quotas; throttle it when over one. Fetches
        record their own (``fetch_throttle_ms``), as a throttled fetch is answered empty."""
        produce, request_quota = self.produce, self.request
        if not (produce.quotas or request_quota.quotas):  # ``enabled``, without two calls
            return
        request = response.request
        api_key = request.api_key
        if api_key in EXEMPT_APIS or api_key == ApiKey.FETCH:
            return
        user = sanitize(request.principal.name)
        client_id = request.header.client_id or ""
        now = time.monotonic()
        throttle = 0
        if api_key == ApiKey.PRODUCE and produce.enabled:
            throttle = produce.record_and_get_throttle_ms(user, client_id, len(request.buffer), now)
        if request_quota.enabled and response.parts:  # acks=0 produce is exempt from the request quota
            throttle = max(throttle, self._record_request_time(request, user, client_id, now))
        if throttle > response.throttle_ms:
            response.throttle(throttle)

    @property
    def fetch_quotas_apply(self) -> bool:
        """Whether a consumer fetch may be throttled at all (a fetch or request quota is set)."""
        return bool(self.fetch.quotas or self.request.quotas)

    def fetch_bound(self, request: Request) -> float:
        """The most bytes one consumer fetch may return under its fetch quota (inf without one)."""
        if not self.fetch.quotas:
            return math.inf
        return self.fetch.max_value_in_quota_window(sanitize(request.principal.name), request.header.client_id or "")

    def fetch_throttle_ms(self, request: Request, response_size: int) -> int:
        """A consumer fetch about to be answered with ``response_size`` bytes: record them and the
        request's handler time, and return the throttle time. When it is above zero the fetch is
        answered empty, so its bytes are taken back (Kafka's handleFetchRequest)."""
        fetch, request_quota = self.fetch, self.request
        if not (fetch.quotas or request_quota.quotas):
            return 0
        user = sanitize(request.principal.name)
        client_id = request.header.client_id or ""
        now = time.monotonic()
        throttle = fetch.record_and_get_throttle_ms(user, client_id, response_size, now) if fetch.quotas else 0
        if request_quota.quotas:
            throttle = max(throttle, self._record_request_time(request, user, client_id, now))
        if throttle and fetch.quotas:
            fetch.unrecord(user, client_id, response_size, now)
        return throttle

    def _record_request_time(self, request: Request, user: str, client_id: str, now: float) -> int:
        """The request's handler time so far as a percentage of one thread (request_percentage)."""
        started = request.dequeue_time_ns or request.receive_time_ns
        busy_ns = request.handler_time_ns or (time.monotonic_ns() - started)
        return self.request.record_and_get_throttle_ms(user, client_id, busy_ns * 100.0 / 1e9, now)
