"""Partition: one partition's replica state on this broker (Kafka's Partition).

The controller's LeaderAndIsr makes this broker the leader or a follower at a leader epoch.
As leader it appends client batches, tracks what the other ISR members have (their log end
offsets, reported by their fetches) and moves the high watermark to the smallest log end
offset in the ISR, which with an ISR of one is simply the log end.
"""

from __future__ import annotations

import uuid
from typing import Any

from protocol.errors import Errors, KafkaApiError
from storage.log import Log

NO_EPOCH = -1


class Partition:
    def __init__(self, topic: str, partition: int, broker_id: int) -> None:
        self.topic = topic
        self.partition = partition
        self.broker_id = broker_id
        self.topic_id: uuid.UUID | None = None
        self.log: Log | None = None
        self.leader_id = -1
        self.leader_epoch = NO_EPOCH
        self.partition_epoch = -1
        self.controller_epoch = -1
        self.replicas: list[int] = []
        self.isr: list[int] = []
        self.remote_log_end_offsets: dict[int, int] = {}  # follower id -> log end offset it fetched from

    def __repr__(self) -> str:
        return (f"Partition({self.topic}-{self.partition}, leader={self.leader_id}, epoch={self.leader_epoch}, "
                f"isr={self.isr})")

    @property
    def is_leader(self) -> bool:
        return self.leader_id == self.broker_id and self.log is not None

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
        return new_epoch

    def make_leader(self, state: Any, log: Log) -> bool:
        """Become leader: start the new epoch at the log end and reset follower progress."""
        new_epoch = self._apply_state(state, log)
        if new_epoch:
            log.maybe_assign_epoch_start_offset(self.leader_epoch, log.log_end_offset)
            self.remote_log_end_offsets = {r: -1 for r in self.replicas if r != self.broker_id}
        self.maybe_increment_high_watermark()
        return new_epoch

    def make_follower(self, state: Any, log: Log) -> bool:
        """Become follower; fetching from the leader belongs to the replica fetcher."""
        self.remote_log_end_offsets = {}
        return self._apply_state(state, log)

    def leader_log(self) -> Log:
        if not self.is_leader:
            raise KafkaApiError(Errors.NOT_LEADER_OR_FOLLOWER,
                                f"broker {self.broker_id} is not the leader of {self.topic}-{self.partition}")
        assert self.log is not None
        return self.log

    def check_leader_epoch(self, current_leader_epoch: int) -> None:
        """A client's view of the leader epoch must match ours (KIP-320)."""
        if current_leader_epoch == NO_EPOCH or current_leader_epoch == self.leader_epoch:
            return
        if current_leader_epoch > self.leader_epoch:
            raise KafkaApiError(Errors.UNKNOWN_LEADER_EPOCH)
        raise KafkaApiError(Errors.FENCED_LEADER_EPOCH)

    def check_min_isr(self, required_acks: int) -> None:
        log = self.leader_log()
        if required_acks == -1 and len(self.isr) < log.config.min_insync_replicas:
            raise KafkaApiError(
                Errors.NOT_ENOUGH_REPLICAS,
                f"the size of the current ISR {self.isr} is insufficient to satisfy the min.isr requirement "
                f"of {log.config.min_insync_replicas} for partition {self.topic}-{self.partition}",
            )

    def maybe_increment_high_watermark(self) -> bool:
        if not self.is_leader:
            return False
        assert self.log is not None
        offsets = [self.log.log_end_offset]
        offsets += [self.remote_log_end_offsets.get(r, -1) for r in self.isr if r != self.broker_id]
        return self.log.maybe_increment_high_watermark(min(offsets))

    def update_follower_fetch_state(self, replica_id: int, fetch_offset: int) -> bool:
        """A follower fetched from ``fetch_offset``: it has everything below; True if the HW moved."""
        if replica_id not in self.remote_log_end_offsets:
            return False
        self.remote_log_end_offsets[replica_id] = fetch_offset
        return self.maybe_increment_high_watermark()

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
