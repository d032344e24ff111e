"""The transaction coordinator (Kafka's ``kafka.coordinator.transaction``) over ``__transaction_state``."""
