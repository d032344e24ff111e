"""ControllerMetrics: Kafka's KafkaController gauges and ControllerStats for one controller.

As in Kafka's KafkaController.updateMetrics, the gauges are recomputed by the controller event
thread after it processes an event (here only when no other event is queued: the values are
exact once a burst of events is done), and are all zero while this broker is not the active
controller. The broker's metrics endpoint reads the fields from another thread: each is one
int, replaced whole.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from coordination.controller.context import ControllerContext
from coordination.controller.states import PartitionState, ReplicaState
from coordination.histogram import Histogram


# Kafka's ControllerState values (KafkaController ControllerState gauge) by the event being handled.
IDLE = 0
CONTROLLER_STATES: dict[str, int] = {
    "startup": 1, "controller_change": 1, "register_and_reelect": 1, "resign": 1, "expire": 1,  # ControllerChange
    "broker_change": 2, "broker_modification": 2,  # BrokerChange
    "topic_change": 3, "partition_modification": 3,  # TopicChange
    "topic_deletion": 4, "stop_replica_response": 4,  # TopicDeletion
    # AlterPartitionReassignment
    "alter_partition_reassignments": 5, "zk_reassignment": 5, "reassignment_isr_change": 5,
    "auto_leader_rebalance": 6,  # AutoLeaderBalance
    "elect_leaders": 7, "preferred_replica_election": 7,  # ManualLeaderBalance
    "controlled_shutdown": 8,  # ControlledShutdown
    "isr_change_notification": 9, "alter_partition": 9,  # IsrChange
    "leader_and_isr_response": 10,  # LeaderAndIsrResponseReceived
    "log_dir_event_notification": 11,  # LogDirChange
    "topic_unclean_leader_election_enable": 14,  # TopicUncleanLeaderElectionEnable
    "list_partition_reassignments": 15,  # ListPartitionReassignment
    "update_features": 17,  # UpdateFeatures
}

# ControllerStats' timer of each ControllerState (Kafka's ControllerState.rateAndTimeMetricName): the
# state's name + "RateAndTimeMs", two kept from older releases; Idle and UpdateMetadataResponseReceived
# have none. Every timer exists from the start, as in Kafka, whether its events ever happen here.
STATE_TIMERS: dict[int, str] = {
    1: "ControllerChangeRateAndTimeMs", 2: "LeaderElectionRateAndTimeMs", 3: "TopicChangeRateAndTimeMs",
    4: "TopicDeletionRateAndTimeMs", 5: "PartitionReassignmentRateAndTimeMs", 6: "AutoLeaderBalanceRateAndTimeMs",
    7: "ManualLeaderBalanceRateAndTimeMs", 8: "ControlledShutdownRateAndTimeMs", 9: "IsrChangeRateAndTimeMs",
    10: "LeaderAndIsrResponseReceivedRateAndTimeMs", 11: "LogDirChangeRateAndTimeMs",
    12: "ControllerShutdownRateAndTimeMs", 13: "UncleanLeaderElectionEnableRateAndTimeMs",
    14: "TopicUncleanLeaderElectionEnableRateAndTimeMs", 15: "ListPartitionReassignmentRateAndTimeMs",
    17: "UpdateFeaturesRateAndTimeMs",
}


@dataclass
class ControllerMetrics:
    offline_partitions_count: int = 0
    preferred_replica_imbalance_count: int = 0
    global_topic_count: int = 0
    global_partition_count: int = 0
    topics_to_delete_count: int = 0
    replicas_to_delete_count: int = 0
    topics_ineligible_to_delete_count: int = 0
    # ControllerStats: UncleanLeaderElectionsPerSec, and how long the events of each state took
    # (STATE_TIMERS; LeaderElectionRateAndTimeMs is the BrokerChange events').
    unclean_leader_elections: int = 0
    state_times_ms: dict[int, Histogram] = field(default_factory=lambda: {state: Histogram() for state in STATE_TIMERS})
    # ControllerState: what the event thread is handling now (Idle between events), on any broker.
    state: int = IDLE

    def event_processed(self, state: int, elapsed_ms: float) -> None:
        """An event of ``state`` took ``elapsed_ms`` on the event thread (Kafka times every event
        with a state timer, on any broker, controller or not)."""
        timer = self.state_times_ms.get(state)
        if timer is not None:
            timer.update(elapsed_ms)

    def update(self, context: ControllerContext, active: bool) -> None:
        if not active:
            self.offline_partitions_count = self.preferred_replica_imbalance_count = 0
            self.global_topic_count = self.global_partition_count = 0
            self.topics_to_delete_count = self.replicas_to_delete_count = 0
            self.topics_ineligible_to_delete_count = 0
            return
        deleting = context.topics_to_be_deleted
        self.offline_partitions_count = sum(
            1 for tp, state in context.partition_states.items()
            if state is PartitionState.OFFLINE and tp.topic not in deleting)
        imbalance = 0
        for tp, leadership in context.leadership.items():
            replicas = context.replicas(tp)
            if tp.topic not in deleting and replicas and replicas[0] != leadership.leader_and_isr.leader:
                imbalance += 1
        self.preferred_replica_imbalance_count = imbalance
        self.global_topic_count = len(context.all_topics)
        self.global_partition_count = len(context.leadership)
        self.topics_to_delete_count = len(deleting)
        self.replicas_to_delete_count = sum(
            1 for replica, state in context.replica_states.items()
            if replica.tp.topic in deleting and state is not ReplicaState.DELETION_SUCCESSFUL)
        self.topics_ineligible_to_delete_count = len(context.topics_ineligible_for_deletion)
