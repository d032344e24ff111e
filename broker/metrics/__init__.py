"""The broker's metrics: Kafka's MBeans served to Prometheus under jmx_exporter's names.

``broker_topic_stats`` and ``request_metrics`` hold the counters the hot paths bump (per request,
per partition of a request; never per record); ``kafka_metrics`` and ``consumer_lag`` read the
rest from the broker's state when Prometheus scrapes; ``mbeans`` names everything as
jmx_exporter with Strimzi's Kafka rules would; ``prometheus_endpoint`` serves
``metrics.prometheus.listener``.
"""
