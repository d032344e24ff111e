"""The classic group coordinator: group membership, rebalances and committed offsets.

``group_metadata`` holds the per-group state machine, ``group_metadata_manager`` the
``__consumer_offsets`` log (partitioning, loading, writes, expiry) and ``group_coordinator``
the protocol logic behind JoinGroup/SyncGroup/Heartbeat/LeaveGroup/OffsetCommit/... .
"""
