"""Helpers that start and stop real external processes (ZooKeeper, brokers) for integration tests."""
