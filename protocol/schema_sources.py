"""Which bundled definitions come from a Kafka newer than 3.9.2, the release the rest is copied from.

The broker serves Kafka 3.9's APIs plus what Kafka 4's clients need on a ZooKeeper cluster
(KIP-848 consumer groups, KIP-932 share groups). Those definitions are taken from the named
Kafka release (``clients/src/main/resources/common/message/`` and the group-coordinator and
share-coordinator modules); where Kafka lists only the ``broker`` listener, ``zkBroker`` is added,
because this ZooKeeper-mode broker serves them.
"""

from __future__ import annotations

NEWER_THAN_3_9: dict[str, str] = {
    # KIP-848: v1 moves SubscribedTopicRegex to v1+ and lets the client choose its member id.
    "ConsumerGroupHeartbeatRequest": "4.2",
    "ConsumerGroupHeartbeatResponse": "4.2",
    # v1 adds the member type (classic or consumer) of each member.
    "ConsumerGroupDescribeRequest": "4.2",
    "ConsumerGroupDescribeResponse": "4.2",
    # v6 (KIP-1043): GROUP_ID_NOT_FOUND with an error message for unknown groups.
    "DescribeGroupsRequest": "4.2",
    "DescribeGroupsResponse": "4.2",
    # KIP-932 share groups (written by scripts/kafka42_share_schemas.py): Kafka 3.9 has only their
    # early-access versions, which Kafka 4.1 removed; 4.2 adds ShareFetch/ShareAcknowledge v2
    # (KIP-1206, KIP-1222), WriteShareGroupState and ReadShareGroupStateSummary v1 (KIP-1226) and
    # the share-group offsets APIs 90-92.
    **{f"{api}{kind}": "4.2" for api in (
        "ShareGroupHeartbeat", "ShareGroupDescribe", "ShareFetch", "ShareAcknowledge", "InitializeShareGroupState",
        "ReadShareGroupState", "WriteShareGroupState", "DeleteShareGroupState", "ReadShareGroupStateSummary",
        "DescribeShareGroupOffsets", "AlterShareGroupOffsets", "DeleteShareGroupOffsets",
    ) for kind in ("Request", "Response")},
}
