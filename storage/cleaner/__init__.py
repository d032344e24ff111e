"""Log compaction: Kafka's log cleaner for ``cleanup.policy=compact`` logs."""
