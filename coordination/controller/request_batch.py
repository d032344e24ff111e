"""Kafka's ControllerBrokerRequestBatch: collects the LeaderAndIsr, UpdateMetadata and StopReplica
work of one controller step per broker, then sends one request of each kind per broker."""
from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from coordination.controller.channel_manager import ControllerChannelManager
from coordination.controller.context import ControllerContext
from coordination.model import LeaderIsrAndControllerEpoch, TopicPartition, uuid_from_b64

LEADER_AND_ISR = 4
STOP_REPLICA = 5
UPDATE_METADATA = 6
# What a 3.9 ZK controller sends with inter.broker.protocol.version >= 3.4.
LEADER_AND_ISR_VERSION = 7
UPDATE_METADATA_VERSION = 8
STOP_REPLICA_VERSION = 4
LEADER_DURING_DELETE = -2  # LeaderAndIsr.LeaderDuringDelete / EpochDuringDelete
NO_EPOCH = -1

StopReplicaCallback = Callable[[int, dict[TopicPartition, int]], None]
LeaderAndIsrCallback = Callable[[int, dict[TopicPartition, int]], None]


@dataclass
class _LeaderAndIsrEntry:
    state: LeaderIsrAndControllerEpoch
    replicas: tuple[int, ...]
    adding: tuple[int, ...]
    removing: tuple[int, ...]
    is_new: bool


@dataclass
class ControllerBrokerRequestBatch:
    context: ControllerContext
    channel: ControllerChannelManager
    controller_id: int
    leader_and_isr: dict[int, dict[TopicPartition, _LeaderAndIsrEntry]] = field(default_factory=dict)
    update_metadata_brokers: set[int] = field(default_factory=set)
    update_metadata_partitions: set[TopicPartition] = field(default_factory=set)
    stop_replica: dict[int, dict[TopicPartition, bool]] = field(default_factory=dict)
    stop_replica_callback: StopReplicaCallback | None = None
    leader_and_isr_callback: LeaderAndIsrCallback | None = None

    def add_leader_and_isr(
        self, broker_ids: Iterable[int], tp: TopicPartition, state: LeaderIsrAndControllerEpoch, is_new: bool
    ) -> None:
        assignment = self.context.assignment(tp)
        if assignment is None:
            return
        for broker_id in broker_ids:
            if broker_id < 0:
                continue
            entry = self.leader_and_isr.setdefault(broker_id, {}).get(tp)
            self.leader_and_isr[broker_id][tp] = _LeaderAndIsrEntry(
                state,
                assignment.replicas,
                assignment.adding_replicas,
                assignment.removing_replicas,
                is_new or (entry is not None and entry.is_new),
            )
        self.add_update_metadata(self.context.live_broker_ids, [tp])

    def add_update_metadata(self, broker_ids: Iterable[int], partitions: Iterable[TopicPartition]) -> None:
        self.update_metadata_brokers.update(b for b in broker_ids if b >= 0)
        self.update_metadata_partitions.update(partitions)

    def add_stop_replica(self, broker_ids: Iterable[int], tp: TopicPartition, delete: bool) -> None:
        for broker_id in broker_ids:
            if broker_id >= 0:
                partitions = self.stop_replica.setdefault(broker_id, {})
                partitions[tp] = partitions.get(tp, False) or delete

    def send(self) -> None:
        """Send everything collected (LeaderAndIsr first, then UpdateMetadata, then StopReplica)."""
        from protocol.messages import LeaderAndIsrRequest, StopReplicaRequest

        epoch = self.context.epoch
        for broker_id, entries in self.leader_and_isr.items():
            if broker_id not in self.context.live_brokers:
                continue
            leaders = {e.state.leader_and_isr.leader for e in entries.values()}
            request = LeaderAndIsrRequest(
                controller_id=self.controller_id,
                controller_epoch=epoch,
                broker_epoch=self.context.broker_epoch(broker_id),
                topic_states=[
                    LeaderAndIsrRequest.LeaderAndIsrTopicState(
                        topic_name=topic,
                        topic_id=self._topic_uuid(topic),
                        partition_states=[
                            self._leader_and_isr_state(tp, entry)
                            for tp, entry in sorted(entries.items())
                            if tp.topic == topic
                        ],
                    )
                    for topic in sorted({tp.topic for tp in entries})
                ],
                live_leaders=[self._live_leader(b) for b in sorted(leaders) if b in self.context.live_brokers],
            )
            callback = None
            if self.leader_and_isr_callback is not None:
                callback = self._leader_and_isr_response_handler(broker_id, self.leader_and_isr_callback)
            self.channel.send(broker_id, LEADER_AND_ISR, LEADER_AND_ISR_VERSION, request, callback)
        if self.update_metadata_brokers:
            self._send_update_metadata()
        for broker_id, partitions in self.stop_replica.items():
            if broker_id not in self.context.live_brokers:
                continue
            request = StopReplicaRequest(
                controller_id=self.controller_id,
                controller_epoch=epoch,
                broker_epoch=self.context.broker_epoch(broker_id),
                topic_states=[
                    StopReplicaRequest.StopReplicaTopicState(
                        topic_name=topic,
                        partition_states=[
                            StopReplicaRequest.StopReplicaPartitionState(
                                partition_index=tp.partition,
                                leader_epoch=self._stop_replica_epoch(tp),
                                delete_partition=delete,
                            )
                            for tp, delete in sorted(partitions.items())
                            if tp.topic == topic
                        ],
                    )
                    for topic in sorted({tp.topic for tp in partitions})
                ],
            )
            callback = None
            if self.stop_replica_callback is not None and any(partitions.values()):
                deleted = [tp for tp, delete in partitions.items() if delete]
                callback = self._stop_replica_response_handler(broker_id, deleted, self.stop_replica_callback)
            self.channel.send(broker_id, STOP_REPLICA, STOP_REPLICA_VERSION, request, callback)
        self.leader_and_isr.clear()
        self.update_metadata_brokers.clear()
        self.update_metadata_partitions.clear()
        self.stop_replica.clear()

    def _topic_uuid(self, topic: str) -> uuid.UUID:
        topic_id = self.context.topic_ids.get(topic)
        return uuid_from_b64(topic_id) if topic_id else uuid.UUID(int=0)

    def _stop_replica_epoch(self, tp: TopicPartition) -> int:
        if self.context.is_topic_queued_for_deletion(tp.topic):
            return LEADER_DURING_DELETE
        state = self.context.leadership.get(tp)
        return NO_EPOCH if state is None else state.leader_and_isr.leader_epoch

    def _leader_and_isr_state(self, tp: TopicPartition, entry: _LeaderAndIsrEntry) -> Any:
        from protocol.messages import LeaderAndIsrRequest

        lai = entry.state.leader_and_isr
        return LeaderAndIsrRequest.LeaderAndIsrPartitionState(
            topic_name=tp.topic,
            partition_index=tp.partition,
            controller_epoch=entry.state.controller_epoch,
            leader=lai.leader,
            leader_epoch=lai.leader_epoch,
            isr=list(lai.isr),
            partition_epoch=lai.partition_epoch,
            replicas=list(entry.replicas),
            adding_replicas=list(entry.adding),
            removing_replicas=list(entry.removing),
            is_new=entry.is_new,
            leader_recovery_state=int(lai.leader_recovery_state),
        )

    def _live_leader(self, broker_id: int) -> Any:
        from protocol.messages import LeaderAndIsrRequest

        endpoint = self.context.live_brokers[broker_id].endpoint(self.channel.listener)
        return LeaderAndIsrRequest.LeaderAndIsrLiveLeader(
            broker_id=broker_id,
            host_name=endpoint.host if endpoint else "",
            port=endpoint.port if endpoint else -1,
        )

    def _send_update_metadata(self) -> None:
        from protocol.messages import UpdateMetadataRequest as UMR

        live = self.context.live_brokers
        brokers = [
            UMR.UpdateMetadataBroker(
                id=info.broker_id,
                endpoints=[
                    UMR.UpdateMetadataEndpoint(
                        port=ep.port, host=ep.host, listener=ep.listener, security_protocol=int(ep.security_protocol)
                    )
                    for ep in info.endpoints
                ],
                rack=info.rack,
            )
            for info in sorted(live.values(), key=lambda i: i.broker_id)
        ]
        partition_states = []
        for tp in sorted(self.update_metadata_partitions):
            state = self.context.leadership.get(tp)
            if state is None:
                continue
            lai = state.leader_and_isr
            replicas = self.context.replicas(tp)
            deleting = self.context.is_topic_queued_for_deletion(tp.topic)
            partition_states.append(
                UMR.UpdateMetadataPartitionState(
                    topic_name=tp.topic,
                    partition_index=tp.partition,
                    controller_epoch=state.controller_epoch,
                    leader=LEADER_DURING_DELETE if deleting else lai.leader,
                    leader_epoch=lai.leader_epoch,
                    isr=list(lai.isr),
                    zk_version=lai.partition_epoch,
                    replicas=list(replicas),
                    # Kafka's isReplicaOnline: a dead or shutting-down broker, or a failed log dir of it
                    offline_replicas=[r for r in replicas if not self.context.is_replica_online(r, tp)],
                )
            )
        topics = sorted({p.topic_name for p in partition_states})
        for broker_id in sorted(self.update_metadata_brokers):
            if broker_id not in live:
                continue
            request = UMR(
                controller_id=self.controller_id,
                controller_epoch=self.context.epoch,
                broker_epoch=self.context.broker_epoch(broker_id),
                topic_states=[
                    UMR.UpdateMetadataTopicState(
                        topic_name=topic,
                        topic_id=self._topic_uuid(topic),
                        partition_states=[p for p in partition_states if p.topic_name == topic],
                    )
                    for topic in topics
                ],
                live_brokers=brokers,
            )
            self.channel.send(broker_id, UPDATE_METADATA, UPDATE_METADATA_VERSION, request)

    def _leader_and_isr_response_handler(
        self, broker_id: int, callback: LeaderAndIsrCallback
    ) -> Callable[[Any], None]:
        names = {uuid_from_b64(topic_id): topic for topic, topic_id in self.context.topic_ids.items()}

        def handle(response: Any) -> None:
            errors = {
                TopicPartition(names[topic.topic_id], p.partition_index): response.error_code or p.error_code
                for topic in response.topics
                if topic.topic_id in names
                for p in topic.partition_errors
            }
            callback(broker_id, errors)

        return handle

    @staticmethod
    def _stop_replica_response_handler(
        broker_id: int, partitions: list[TopicPartition], callback: StopReplicaCallback
    ) -> Callable[[Any], None]:
        def handle(response: Any) -> None:
            per_partition = {
                TopicPartition(p.topic_name, p.partition_index): p.error_code for p in response.partition_errors
            }
            callback(broker_id, {tp: response.error_code or per_partition.get(tp, 0) for tp in partitions})

        return handle
