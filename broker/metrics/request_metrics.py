"""RequestMetrics: Kafka's kafka.network RequestMetrics for every request this broker serves.

Per request name (Kafka's ``ApiKeys.name``, plus FetchConsumer / FetchFollower for fetches, as
Kafka's RequestChannel records them): RequestsPerSec by version, ErrorsPerSec by error (every
error code in a response, as Kafka's ``errorCounts``), and the request's times (queue, local,
remote, response queue, send, total; rounded to whole milliseconds as Kafka does), its size and
the throttle time a client quota gave it, as histograms whose quantiles are computed at scrape time.

Cost per request: a few monotonic clock reads, two dict increments, and one tuple appended to a
bounded deque per request name (all eight measurements share one reservoir row). The error
count walks only the response fields that can hold an error code, from a plan made once per
response class. Everything runs on the event loop: no locks.
"""

from __future__ import annotations

from collections import deque
from typing import TYPE_CHECKING, Any

from coordination.histogram import RESERVOIR_SIZE, quantiles
from protocol.api_keys import API_SPECS, ApiKey
from protocol.errors import Errors
from protocol.messages import Message
from protocol.schema import FieldSpec, MessageSpec

if TYPE_CHECKING:
    from broker.network.request_channel import Request, Response

# Kafka's histogram names, in the order of a reservoir row.
TIME_HISTOGRAMS: tuple[str, ...] = ("RequestQueueTimeMs", "LocalTimeMs", "RemoteTimeMs", "ResponseQueueTimeMs",
                                    "ResponseSendTimeMs", "TotalTimeMs", "RequestBytes", "ThrottleTimeMs")

ErrorPlan = tuple[bool, tuple[tuple[str, bool, "ErrorPlan"], ...]]


def _plan(fields: list[FieldSpec], spec: MessageSpec) -> ErrorPlan:
    """Where error codes are: this struct's own ``ErrorCode``, and the struct fields holding more."""
    own = any(f.name == "ErrorCode" for f in fields)
    children = []
    for f in fields:
        if f.is_struct:
            sub = _plan(spec.structs[f.element_type].fields, spec)
            if sub[0] or sub[1]:
                children.append((f.attr, f.is_array, sub))
    return own, tuple(children)


def _count(body: Any, plan: ErrorPlan, counts: dict[int, int]) -> None:
    own, children = plan
    if own:
        code = body.error_code
        counts[code] = counts.get(code, 0) + 1
    for attr, is_array, sub in children:
        value = getattr(body, attr, None)
        if value is None:
            continue
        if is_array:
            for item in value:
                _count(item, sub, counts)
        else:
            _count(value, sub, counts)


_PLANS: dict[type[Message], ErrorPlan] = {}


def error_counts(body: Message) -> dict[int, int]:
    """Every error code in a response body with how often it appears (Kafka's errorCounts)."""
    cls = type(body)
    plan = _PLANS.get(cls)
    if plan is None:
        spec: MessageSpec = cls._spec  # type: ignore[attr-defined]
        plan = _PLANS[cls] = _plan(spec.fields, spec)
    counts: dict[int, int] = {}
    _count(body, plan, counts)
    return counts


def _ms(nanos: int) -> int:
    return round(max(nanos, 0) / 1_000_000)


class RequestTimes:
    """One request name's histograms: a count and the last samples, one row per request."""

    __slots__ = ("count", "rows")

    def __init__(self) -> None:
        self.count = 0
        self.rows: deque[tuple[int, ...]] = deque(maxlen=RESERVOIR_SIZE)

    def add(self, row: tuple[int, ...]) -> None:
        self.count += 1
        self.rows.append(row)

    def quantiles(self) -> list[tuple[str, list[tuple[str, float]]]]:
        """Per histogram name, its (quantile label, value) pairs."""
        rows = list(self.rows)
        return [(name, quantiles(row[i] for row in rows)) for i, name in enumerate(TIME_HISTOGRAMS)]


class RequestMetrics:
    def __init__(self) -> None:
        self.names = {int(key): spec.name for key, spec in API_SPECS.items()}
        self.requests: dict[tuple[str, int], int] = {}  # (request name, version) -> count
        self.errors: dict[tuple[str, str], int] = {}    # (request name, error name) -> count
        self.times: dict[str, RequestTimes] = {}

    def on_response(self, response: Response) -> None:
        """The handler's answer is ready (Kafka's sendResponse): count the errors it carries."""
        body = response.body
        if body is None:
            return
        name = self.names[response.request.api_key]
        errors = self.errors
        for code, count in error_counts(body).items():
            try:
                key = (name, Errors(code).name)
            except ValueError:
                key = (name, "UNKNOWN_SERVER_ERROR")
            errors[key] = errors.get(key, 0) + count

    def on_complete(self, request: Request, response_dequeue_ns: int, end_ns: int) -> None:
        """The response is written (or dropped, for acks=0): Kafka's updateRequestMetrics."""
        api_key = request.api_key
        name = self.names[api_key]
        start = request.receive_time_ns
        dequeue = request.dequeue_time_ns or start
        response_complete = request.response_complete_ns or end_ns
        local_complete = request.api_local_complete_ns
        if local_complete is None or local_complete > response_complete:
            local_complete = response_complete  # answered before the handler returned
        row = (_ms(dequeue - start), _ms(local_complete - dequeue), _ms(response_complete - local_complete),
               _ms(response_dequeue_ns - response_complete), _ms(end_ns - response_dequeue_ns), _ms(end_ns - start),
               len(request.buffer) - request.header.header_size, request.throttle_time_ms)
        key = (name, request.api_version)
        self.requests[key] = self.requests.get(key, 0) + 1
        self._times(name).add(row)
        if api_key == ApiKey.FETCH:
            fetch_name = "FetchFollower" if _from_follower(request) else "FetchConsumer"
            key = (fetch_name, request.api_version)
            self.requests[key] = self.requests.get(key, 0) + 1
            self._times(fetch_name).add(row)

    def _times(self, name: str) -> RequestTimes:
        times = self.times.get(name)
        if times is None:
            times = self.times[name] = RequestTimes()
        return times


def _from_follower(request: Request) -> bool:
    body = request.body()
    replica_id = body.replica_state.replica_id if request.api_version >= 15 else body.replica_id
    return replica_id >= 0
