"""Partition: one partition's replica state on this broker (Kafka's Partition).

The controller's LeaderAndIsr makes this broker the leader or a follower at a leader epoch.
As leader it appends client batches, tracks what each follower has (its log end offset and
when it last caught up, both learnt from its fetches), moves the high watermark to the
smallest log end offset in the ISR, and proposes ISR changes: a follower that caught up
joins, one that lagged for ``replica.lag.time.max.ms`` leaves. A proposal is in flight to the
controller (AlterPartition) until it answers; meanwhile the high watermark counts the
*maximal* ISR (the committed one plus a joining follower), as Kafka does, so a write is never
acknowledged on the strength of an ISR the controller has not recorded.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from protocol.errors import Errors, KafkaApiError
from storage.clock import now_ms
from storage.leader_epoch_cache import UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
from storage.log import Log

NO_EPOCH = -1


@dataclass(slots=True)
class FollowerState:
    """What the leader knows of one follower (Kafka's Replica)."""

    log_end_offset: int = -1
    last_caught_up_time_ms: int = 0
    last_fetch_leader_log_end_offset: int = -1
    last_fetch_time_ms: int = 0

    def update_fetch_state(self, fetch_offset: int, leader_end_offset: int, now_ms: int) -> None:
        """Caught up now if it fetched from our log end, or as of its previous fetch if it has
        everything we had then (so a steady trickle of appends does not make it look lagging)."""
        if fetch_offset >= leader_end_offset:
            self.last_caught_up_time_ms = max(self.last_caught_up_time_ms, now_ms)
        elif fetch_offset >= self.last_fetch_leader_log_end_offset:
            self.last_caught_up_time_ms = max(self.last_caught_up_time_ms, self.last_fetch_time_ms)
        self.log_end_offset = fetch_offset
        self.last_fetch_leader_log_end_offset = leader_end_offset
        self.last_fetch_time_ms = now_ms


class Partition:
    def __init__(self, topic: str, partition: int, broker_id: int) -> None:
        self.topic = topic
        self.partition = partition
        self.broker_id = broker_id
        self.topic_id: uuid.UUID | None = None
        self._log: Log | None = None
        self.leader_id = -1
        self.leader_epoch = NO_EPOCH
        self.leader_epoch_start_offset = -1
        self.partition_epoch = -1
        self.controller_epoch = -1
        self.replicas: list[int] = []
        self.isr: list[int] = []  # as committed by the controller
        self.pending_isr: list[int] | None = None  # proposed in AlterPartition, not answered yet
        self.followers: dict[int, FollowerState] = {}

    def __repr__(self) -> str:
        return (f"Partition({self.topic}-{self.partition}, leader={self.leader_id}, epoch={self.leader_epoch}, "
                f"isr={self.isr})")

    @property
    def log(self) -> Log | None:
        """This replica's log; once a log dir move swapped in its future log, that one."""
        current = self._log
        if current is not None and current.moved_to is not None:
            while current.moved_to is not None:
                current = current.moved_to
            self._log = current
        return current

    @log.setter
    def log(self, log: Log | None) -> None:
        self._log = log

    @property
    def is_leader(self) -> bool:
        return self.leader_id == self.broker_id and self.log is not None

    @property
    def maximal_isr(self) -> list[int]:
        """The ISR the high watermark must wait for: committed, plus a joining follower in flight."""
        if self.pending_isr is None:
            return self.isr
        return self.isr + [r for r in self.pending_isr if r not in self.isr]

    def _apply_state(self, state: Any, log: Log) -> bool:
        """Common part of becoming leader or follower; True if the leader epoch moved."""
        new_epoch = state.leader_epoch != self.leader_epoch
        self.log = log
        self.leader_id = state.leader
        self.leader_epoch = state.leader_epoch
        self.partition_epoch = state.partition_epoch
        self.controller_epoch = state.controller_epoch
        self.replicas = list(state.replicas)
        self.isr = list(state.isr)
        self.pending_isr = None
        return new_epoch

    def make_leader(self, state: Any, log: Log) -> bool:
        """Become leader: start the new epoch at the log end and reset follower progress."""
        was_leader = self.is_leader
        new_epoch = self._apply_state(state, log)
        if new_epoch or not was_leader:
            self.leader_epoch_start_offset = log.assign_epoch_at_log_end(self.leader_epoch)
            # Followers in the ISR count as caught up now: they get a full lag period to fetch.
            current = now_ms()
            self.followers = {r: FollowerState(last_caught_up_time_ms=current if r in self.isr else 0)
                              for r in self.replicas if r != self.broker_id}
        else:  # the same epoch, maybe a new replica set: followers that left it are forgotten
            self.followers = {r: self.followers.get(r) or FollowerState() for r in self.replicas
                              if r != self.broker_id}
        self.maybe_increment_high_watermark()
        return new_epoch

    def make_follower(self, state: Any, log: Log) -> bool:
        """Become follower; fetching from the leader belongs to the replica fetcher."""
        self.followers = {}
        return self._apply_state(state, log)

    def leader_log(self) -> Log:
        log = self.log  # is_leader, inlined: every produce and fetch partition asks
        if log is None or self.leader_id != self.broker_id:
            raise KafkaApiError(Errors.NOT_LEADER_OR_FOLLOWER,
                                f"broker {self.broker_id} is not the leader of {self.topic}-{self.partition}")
        return log

    def check_follower(self, replica_id: int) -> None:
        """A replica fetch must come from one of this partition's followers: another broker of its
        replica set, never an outsider nor the leader itself (Kafka's followerReplicaOrThrow)."""
        if replica_id not in self.followers:
            raise KafkaApiError(Errors.NOT_LEADER_OR_FOLLOWER,
                                f"Received fetch request from invalid replica {replica_id}")

    def check_leader_epoch(self, current_leader_epoch: int) -> None:
        """A client's view of the leader epoch must match ours (KIP-320)."""
        if current_leader_epoch == NO_EPOCH or current_leader_epoch == self.leader_epoch:
            return
        if current_leader_epoch > self.leader_epoch:
            raise KafkaApiError(Errors.UNKNOWN_LEADER_EPOCH)
        raise KafkaApiError(Errors.FENCED_LEADER_EPOCH)

    def diverging_epoch(self, last_fetched_epoch: int, fetch_offset: int) -> tuple[int, int] | None:
        """A fetcher's log diverges from ours (KIP-595 truncation on fetch, Kafka's readRecords):
        where our copy of its last fetched epoch ends, as (epoch, end offset), when that is before its
        fetch offset or an older epoch; None when it may read on. Kafka's followers (IBP 2.7+) learn
        where to truncate only from this answer, never from OffsetsForLeaderEpoch."""
        log = self.leader_log()
        epoch, end_offset = log.end_offset_for_epoch(last_fetched_epoch)
        if epoch == UNDEFINED_EPOCH or end_offset == UNDEFINED_EPOCH_OFFSET:
            raise KafkaApiError(Errors.OFFSET_OUT_OF_RANGE, f"the end offset of epoch {last_fetched_epoch} "
                                f"of {self.topic}-{self.partition} is unknown")
        if fetch_offset < log.log_start_offset:
            raise KafkaApiError(Errors.OFFSET_OUT_OF_RANGE, f"offset {fetch_offset} of {self.topic}-"
                                f"{self.partition} is below the log start offset {log.log_start_offset}")
        if epoch < last_fetched_epoch or end_offset < fetch_offset:
            return epoch, end_offset
        return None

    def check_min_isr(self, required_acks: int) -> None:
        if required_acks != -1:
            return
        log = self.leader_log()
        if len(self.isr) < log.config.min_insync_replicas:
            raise KafkaApiError(
                Errors.NOT_ENOUGH_REPLICAS,
                f"the size of the current ISR {self.isr} is insufficient to satisfy the min.isr requirement "
                f"of {log.config.min_insync_replicas} for partition {self.topic}-{self.partition}",
            )

    def maybe_increment_high_watermark(self) -> bool:
        log = self.log
        if log is None or self.leader_id != self.broker_id:
            return False
        hw = log.log_end_offset
        me = self.broker_id
        for r in self.isr if self.pending_isr is None else self.maximal_isr:  # maximal_isr, inlined
            if r != me:
                follower = self.followers.get(r)
                hw = min(hw, follower.log_end_offset if follower is not None else -1)
        return log.maybe_increment_high_watermark(hw)

    def update_follower_fetch_state(self, replica_id: int, fetch_offset: int) -> bool:
        """A follower fetched from ``fetch_offset``: it has everything below; True if the HW moved."""
        follower = self.followers.get(replica_id)
        if follower is None or self.log is None:
            return False
        follower.update_fetch_state(fetch_offset, self.log.log_end_offset, now_ms())
        return self.maybe_increment_high_watermark()

    def isr_to_expand(self, replica_id: int) -> list[int] | None:
        """The ISR to propose if this follower may join: it has everything up to the high
        watermark and everything of the current leader epoch (Kafka's isFollowerInSync)."""
        follower = self.followers.get(replica_id)
        if (not self.is_leader or self.pending_isr is not None or follower is None or replica_id in self.isr
                or replica_id not in self.replicas):
            return None
        assert self.log is not None
        if follower.log_end_offset >= self.log.high_watermark and \
                follower.log_end_offset >= self.leader_epoch_start_offset:
            return self.isr + [replica_id]
        return None

    def isr_to_shrink(self, lag_time_max_ms: int, current_ms: int) -> list[int] | None:
        """The ISR without the followers that have not caught up for ``lag_time_max_ms``."""
        if not self.is_leader or self.pending_isr is not None:
            return None
        lagging = {r for r in self.isr if r != self.broker_id
                   and current_ms - self.followers.get(r, FollowerState()).last_caught_up_time_ms > lag_time_max_ms}
        if not lagging:
            return None
        return [r for r in self.isr if r not in lagging]

    def apply_isr_change(self, leader_epoch: int, isr: list[int], partition_epoch: int) -> bool:
        """The controller accepted an ISR change; False if it concerns an epoch we left meanwhile."""
        self.pending_isr = None
        if leader_epoch != self.leader_epoch or not self.is_leader:
            return False
        self.isr = list(isr)
        self.partition_epoch = partition_epoch
        return True

    def check_enough_replicas_reach_offset(self, required_offset: int) -> tuple[bool, Errors]:
        """acks=all: (done, error) once the high watermark covers ``required_offset``."""
        if not self.is_leader:
            return True, Errors.NOT_LEADER_OR_FOLLOWER
        assert self.log is not None
        if self.log.high_watermark >= required_offset:
            if len(self.isr) < self.log.config.min_insync_replicas:
                return True, Errors.NOT_ENOUGH_REPLICAS_AFTER_APPEND
            return True, Errors.NONE
        return False, Errors.NONE
