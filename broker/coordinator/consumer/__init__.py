"""KIP-848 consumer groups: the coordinator serves them beside the classic groups, in the same log."""
