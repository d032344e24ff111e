"""Partition logs in Kafka's on-disk format.

Entry points: ``storage.log_manager.LogManager`` (log dirs, startup recovery, periodic
retention/flush/checkpoints), ``storage.log.Log`` (one partition: append, read, truncate,
producer state, leader epochs), ``storage.file_records.FileRecords`` (zero-copy read slices),
``storage.log_config.LogConfig`` and ``python -m storage.dump``.
"""
