"""The ZooKeeper-mode controller: one elected broker drives partition leadership and replica
placement from ZooKeeper watches, through a single-threaded event queue (Kafka's KafkaController)."""
