"""Kafka's ZooKeeper-mode ACL authorizer (``kafka.security.authorizer.AclAuthorizer``)."""
