"""MBeanFamilies: Kafka's MBeans as Prometheus metrics, named as jmx_exporter names them with the
Kafka rules Strimzi ships (``kafka-metrics.yaml``, ``lowercaseOutputName: true``), so dashboards and
alerts written for a JMX-exported Kafka work unchanged.

Callers name a metric the way Kafka registers it (``kafka.server:type=BrokerTopicMetrics``,
``MessagesInPerSec``, ``topic=...``) with the kind of Yammer metric behind it; the rules decide the
Prometheus name, type and labels:

- a meter's Count: ``kafka_<domain>_<type>_<name without PerSec...>_total`` (counter) when the
  name has ``PerSec``, else ``kafka_<domain>_<type>_<name>_count``; a meter whose name has
  ``Percent`` also exports its MeanRate as ``kafka_<domain>_<type>_<name before Percent>_percent``;
- a gauge's Value: ``..._<name before Percent>_percent`` for percent gauges with at most one key,
  else ``kafka_<domain>_<type>_<name>``;
- a histogram or timer: its percentiles as ``kafka_<domain>_<type>_<name>{quantile="0.50"...}``
  and its Count as ``..._count`` (a summary without ``_sum``, as the rules emulate it);
- every key property after ``name`` becomes a label of the same name (not lower-cased), and a
  rule takes at most two; characters outside ``[a-zA-Z0-9_:]`` become ``_``, repeated ones merged,
  then the name is lower-cased.

Strimzi's rules match only ``kafka.<word>`` domains; the group coordinator's MBeans
(``kafka.coordinator.group``) get the same treatment with the dot sanitized, as jmx_exporter does.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator

from prometheus_client.core import Metric

_UNSAFE = re.compile(r"[^a-zA-Z0-9:_]")
_REPEATED = re.compile(r"__+")
MAX_KEYS = 2  # the generic rules take at most two key properties after ``name``


def _safe(name: str) -> str:
    return _REPEATED.sub("_", _UNSAFE.sub("_", name)).lower()


def _prefix(bean: str) -> str:
    """``kafka.server:type=ReplicaManager`` -> ``kafka_server_replicamanager``."""
    domain, _, type_ = bean.partition(":type=")
    if not domain.startswith("kafka.") or not type_:
        raise ValueError(f"not a Kafka MBean type: {bean}")
    return f"{domain}_{type_}"


def _check(name: str, keys: dict[str, str]) -> None:
    if len(keys) > MAX_KEYS:
        raise ValueError(f"{name}: the rules take at most {MAX_KEYS} key properties, got {keys}")


class MBeanFamilies:
    """The families of one scrape, filled by the collectors and handed to prometheus_client."""

    def __init__(self) -> None:
        self._families: dict[str, Metric] = {}

    def _family(self, name: str, help_text: str, kind: str) -> Metric:
        family = self._families.get(name)
        if family is None:
            family = self._families[name] = Metric(name, help_text, kind)
        return family

    def _typed(self, name: str, help_text: str, kind: str, keys: dict[str, str], value: float) -> None:
        """A counter (``name`` ends in ``_total``, the family name without it) or a gauge sample."""
        family = name.removesuffix("_total") if kind == "counter" else name
        self._family(family, help_text, kind).add_sample(name, dict(keys), value)

    def gauge(self, bean: str, name: str, value: float, **keys: str) -> None:
        _check(name, keys)
        help_text = f"{bean},name={name} Value"
        if "Percent" in name and len(keys) <= 1:
            self._typed(_safe(f"{_prefix(bean)}_{name[:name.rindex('Percent')]}_percent"), help_text, "gauge",
                        keys, value)
        else:
            self._typed(_safe(f"{_prefix(bean)}_{name}"), help_text, "gauge", keys, value)

    def meter(self, bean: str, name: str, count: float, mean_rate: float | None = None, **keys: str) -> None:
        _check(name, keys)
        help_text = f"{bean},name={name} Count"
        if "PerSec" in name:
            self._typed(_safe(f"{_prefix(bean)}_{name[:name.rindex('PerSec')]}_total"), help_text, "counter",
                        keys, count)
        else:  # a counter whose name does not end in _total: untyped, so the sample keeps its name
            family = _safe(f"{_prefix(bean)}_{name}_count")
            self._family(family, help_text, "unknown").add_sample(family, dict(keys), count)
        if mean_rate is not None and "Percent" in name and not keys:
            self._typed(_safe(f"{_prefix(bean)}_{name[:name.rindex('Percent')]}_percent"),
                        f"{bean},name={name} MeanRate", "gauge", keys, mean_rate)

    def histogram(self, bean: str, name: str, count: int, quantiles: Iterable[tuple[str, float]],
                  **keys: str) -> None:
        _check(name, keys)
        family_name = _safe(f"{_prefix(bean)}_{name}")
        family = self._family(family_name, f"{bean},name={name} percentiles and Count", "summary")
        for label, value in quantiles:
            family.add_sample(family_name, {**keys, "quantile": label}, value)
        family.add_sample(f"{family_name}_count", dict(keys), count)

    def kafka_metric(self, bean: str, attribute: str, value: float, **keys: str) -> None:
        """A Kafka-metrics (not Yammer) attribute of a bean keyed by listener and network processor:
        ``kafka_server_<type>_<attribute>`` with those keys as labels (a rule of its own)."""
        self._typed(_safe(f"{_prefix(bean)}_{attribute}"), f"{bean} {attribute}", "gauge", keys, value)

    def __iter__(self) -> Iterator[Metric]:
        return iter(self._families.values())
