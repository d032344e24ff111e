"""Kafka's security on the broker: TLS, SASL, principals, the ACL authorizer and client quotas."""
