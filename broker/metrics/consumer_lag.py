"""ConsumerLag: consumer-group lag under the names kafka_exporter gives it, computed by the broker.

kafka_exporter asks every broker for its groups, their committed offsets and each partition's
newest offset (ListOffsets latest: the high watermark), and exports
``kafka_consumergroup_current_offset`` / ``kafka_consumergroup_lag`` {consumergroup, topic,
partition}, their ``_sum`` per topic, ``kafka_consumergroup_members`` and
``kafka_topic_partition_current_offset`` {topic, partition}. Here each broker exports the groups it
coordinates and the partitions it leads, so summing over brokers counts everything once. The high
watermark of a partition led elsewhere is asked of its leader (ListOffsets, bounded by a timeout)
at scrape time, as kafka_exporter does; a partition whose leader does not answer has no lag sample.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from prometheus_client.core import Metric

from broker.coordinator.group.group_metadata import GroupState
from broker.network.network_client import NETWORK_ERRORS, NetworkClients
from protocol.api_keys import ApiKey
from protocol.errors import Errors
from protocol.messages import ListOffsetsRequest

if TYPE_CHECKING:
    from broker.security.client_security import ClientSecurity
    from broker.services import BrokerServices

log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]
LATEST_TIMESTAMP = -1
LIST_OFFSETS_VERSION = 5
CONSUMER_REPLICA_ID = -1


def _gauge(name: str, help_text: str) -> Metric:
    return Metric(name, help_text, "gauge")


class ConsumerLag:
    def __init__(self, services: BrokerServices, security: ClientSecurity, timeout_s: float) -> None:
        self.services = services
        self._clients = NetworkClients(f"broker-{services.broker_id}-metrics", timeout_s, security)

    async def collect(self) -> list[Metric]:
        """Run on the event loop."""
        replica_manager = self.services.replica_manager
        current = _gauge("kafka_topic_partition_current_offset", "Current Offset of a Broker at Topic/Partition")
        for (topic, index), partition in list(replica_manager.partitions.items()):
            if partition.is_leader and partition.log is not None:
                current.add_sample(current.name, {"topic": topic, "partition": str(index)},
                                   partition.log.high_watermark)
        coordinator = self.services.group_coordinator
        groups = [g for g in (coordinator.manager.current_groups() if coordinator is not None else [])
                  if g.state is not GroupState.DEAD]
        members = _gauge("kafka_consumergroup_members", "Amount of members in a consumer group")
        committed: dict[str, dict[TopicPartition, int]] = {}
        for group in groups:
            members.add_sample(members.name, {"consumergroup": group.group_id}, len(group.members))
            if group.offsets:
                committed[group.group_id] = {tp: offset.offset for tp, offset in group.offsets.items()}
        ends = await self._end_offsets({tp for offsets in committed.values() for tp in offsets})
        return [current, members, *self._group_offsets(committed, ends)]

    @staticmethod
    def _group_offsets(committed: dict[str, dict[TopicPartition, int]], ends: dict[TopicPartition, int]
                       ) -> list[Metric]:
        offset = _gauge("kafka_consumergroup_current_offset", "Current Offset of a ConsumerGroup at Topic/Partition")
        lag = _gauge("kafka_consumergroup_lag", "Current Approximate Lag of a ConsumerGroup at Topic/Partition")
        offset_sum = _gauge("kafka_consumergroup_current_offset_sum",
                            "Current Offset of a ConsumerGroup at Topic for all partitions")
        lag_sum = _gauge("kafka_consumergroup_lag_sum",
                         "Current Approximate Lag of a ConsumerGroup at Topic for all partitions")
        for group_id, offsets in committed.items():
            sums: dict[str, tuple[int, int]] = {}
            for (topic, index), value in sorted(offsets.items()):
                labels = {"consumergroup": group_id, "topic": topic, "partition": str(index)}
                offset.add_sample(offset.name, labels, value)
                offset_total, lag_total = sums.get(topic, (0, 0))
                end = ends.get((topic, index))
                if end is not None:  # no committed offset (-1) shows as lag -1, left out of the sum
                    partition_lag = -1 if value == -1 else end - value
                    lag.add_sample(lag.name, labels, partition_lag)
                    if value != -1:
                        lag_total += partition_lag
                sums[topic] = (offset_total + value, lag_total)
            for topic, (offset_total, lag_total) in sums.items():
                offset_sum.add_sample(offset_sum.name, {"consumergroup": group_id, "topic": topic}, offset_total)
                lag_sum.add_sample(lag_sum.name, {"consumergroup": group_id, "topic": topic}, lag_total)
        return [offset, lag, offset_sum, lag_sum]

    async def _end_offsets(self, partitions: set[TopicPartition]) -> dict[TopicPartition, int]:
        """Each partition's high watermark: ours where we lead it, else its leader's answer."""
        ends: dict[TopicPartition, int] = {}
        remote: dict[int, list[TopicPartition]] = {}
        services = self.services
        for tp in partitions:
            partition = services.replica_manager.get_partition(*tp)
            if partition is not None and partition.is_leader and partition.log is not None:
                ends[tp] = partition.log.high_watermark
                continue
            state = services.metadata_cache.partition(*tp)
            if state is not None and state.leader >= 0:
                remote.setdefault(state.leader, []).append(tp)
        answers = await asyncio.gather(*(self._ask_leader(leader, tps) for leader, tps in remote.items()))
        for answer in answers:
            ends.update(answer)
        return ends

    async def _ask_leader(self, leader: int, partitions: list[TopicPartition]) -> dict[TopicPartition, int]:
        endpoint = self.services.metadata_cache.broker_endpoint(leader, self.services.config.inter_broker_listener_name)
        if endpoint is None:
            return {}
        by_topic: dict[str, list[int]] = {}
        for topic, index in partitions:
            by_topic.setdefault(topic, []).append(index)
        request = ListOffsetsRequest(replica_id=CONSUMER_REPLICA_ID, isolation_level=0, topics=[
            ListOffsetsRequest.ListOffsetsTopic(name=topic, partitions=[
                ListOffsetsRequest.ListOffsetsPartition(partition_index=i, current_leader_epoch=-1,
                                                        timestamp=LATEST_TIMESTAMP) for i in indexes])
            for topic, indexes in by_topic.items()])
        try:
            response = await self._clients.send(leader, endpoint, request, ApiKey.LIST_OFFSETS, LIST_OFFSETS_VERSION)
        except NETWORK_ERRORS as exc:
            log.debug("No end offsets from broker %d for the consumer lag metrics: %s", leader, exc)
            return {}
        return {(topic.name, p.partition_index): p.offset for topic in response.topics for p in topic.partitions
                if p.error_code == Errors.NONE}

    def close(self) -> None:
        self._clients.close()
