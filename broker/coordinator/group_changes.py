"""A group change exists only once its records are written (Kafka's coordinator runtime).

Kafka's runtime applies a change to timeline-backed state and, when appending its records fails,
reverts that state to the last committed snapshot. The consumer- and share-group coordinators here
apply a change to their in-memory group at once; ``write_or_revert`` puts back the copy taken
before the change (``snapshot``) when the records were not appended, so a member retrying finds the
epoch it knows. Records appended to the leader's log but not replicated in time stay: they commit
with the log, or a leadership change unloads the group and its next coordinator replays the log it
has, so memory never holds less than the log (a group reverted under records that later commit
would hand the same partitions out twice).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Self, TypeVar

from protocol.errors import Errors, KafkaApiError


@dataclass
class RevertibleGroup(ABC):
    """A group whose changes can be undone until their records are written."""

    # Changes applied in memory whose records are being or were written.
    changes: int = field(default=0, kw_only=True)
    # (change, state before it) of the earliest change whose write failed while later changes were
    # in flight: the last of those goes back there if its write fails too.
    failed_base: tuple[int, Any] | None = field(default=None, kw_only=True, repr=False, compare=False)

    @abstractmethod
    def snapshot(self) -> Self:
        """A copy that shares nothing a later change mutates in place."""

    def restore(self, snapshot: Self) -> None:
        changes, failed_base = self.changes, self.failed_base
        self.__dict__.update(snapshot.__dict__)
        self.changes, self.failed_base = changes, failed_base


G = TypeVar("G", bound=RevertibleGroup)


async def write_or_revert(group: G, before: G, write: Callable[[], Awaitable[None]]) -> None:
    """Run ``write`` (which raises KafkaApiError when the records are not written); on failure the
    group goes back to the state before the earliest change that failed, once no change applied
    after it is still being written (their writes decide), and the error is raised."""
    group.changes += 1
    mine = group.changes
    try:
        await write()
    except KafkaApiError as exc:
        if isinstance(exc, CoordinatorWriteError) and exc.appended:
            # in the log: the change stands, as Kafka's runtime keeps it until the high watermark moves
            if group.changes == mine:
                group.failed_base = None
            raise
        if group.failed_base is None or group.failed_base[0] > mine:
            group.failed_base = (mine, before)
        if group.changes == mine:
            group.restore(group.failed_base[1])
            group.failed_base = None
        raise
    if group.changes == mine:
        group.failed_base = None


# A failed append of coordinator records as the group coordinator's APIs answer it (Kafka's
# CoordinatorOperationExceptionHelper): the client retries or rediscovers the coordinator. An append
# that is not replicated in time (REQUEST_TIMED_OUT, or here NOT_ENOUGH_REPLICAS_AFTER_APPEND) counts
# as the coordinator being unavailable.
_WRITE_ERRORS = {
    Errors.NETWORK_EXCEPTION: Errors.COORDINATOR_LOAD_IN_PROGRESS,
    **dict.fromkeys((Errors.UNKNOWN_TOPIC_OR_PARTITION, Errors.NOT_ENOUGH_REPLICAS,
                     Errors.NOT_ENOUGH_REPLICAS_AFTER_APPEND, Errors.REQUEST_TIMED_OUT),
                    Errors.COORDINATOR_NOT_AVAILABLE),
    **dict.fromkeys((Errors.NOT_LEADER_OR_FOLLOWER, Errors.KAFKA_STORAGE_ERROR), Errors.NOT_COORDINATOR),
    **dict.fromkeys((Errors.MESSAGE_TOO_LARGE, Errors.RECORD_LIST_TOO_LARGE, Errors.INVALID_FETCH_SIZE),
                    Errors.UNKNOWN_SERVER_ERROR),
}


# Append errors that come after the records reached the leader's log (the replicas did not catch up in time).
_APPENDED = frozenset({Errors.REQUEST_TIMED_OUT, Errors.NOT_ENOUGH_REPLICAS_AFTER_APPEND})


class CoordinatorWriteError(KafkaApiError):
    """A coordinator write that failed, answered as the coordinator's APIs answer it; ``appended``
    when its records are in the leader's log all the same."""

    def __init__(self, append_error: Errors) -> None:
        super().__init__(_WRITE_ERRORS.get(append_error, append_error))
        self.appended = append_error in _APPENDED

