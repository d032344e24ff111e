"""Quota keys and entities as Kafka stores them (DynamicConfig.User/Client/Ip, ConfigEntityName).

``/config/users/<user>``, ``/config/users/<user>/clients/<client-id>`` and ``/config/clients/
<client-id>`` hold ``producer_byte_rate`` and ``consumer_byte_rate`` (longs), ``request_percentage``
and ``controller_mutation_rate`` (doubles); ``/config/ips/<ip>`` holds ``connection_creation_rate``.
Names are sanitized in paths; ``<default>`` is the default entity.
"""

from __future__ import annotations

import math
from decimal import Decimal
from typing import Literal

PRODUCER_BYTE_RATE = "producer_byte_rate"
CONSUMER_BYTE_RATE = "consumer_byte_rate"
REQUEST_PERCENTAGE = "request_percentage"
CONTROLLER_MUTATION_RATE = "controller_mutation_rate"
CONNECTION_CREATION_RATE = "connection_creation_rate"

QuotaValueType = Literal["long", "double", "int"]
CLIENT_QUOTA_KEYS: dict[str, QuotaValueType] = {PRODUCER_BYTE_RATE: "long", CONSUMER_BYTE_RATE: "long",
                                                REQUEST_PERCENTAGE: "double", CONTROLLER_MUTATION_RATE: "double"}
IP_QUOTA_KEYS: dict[str, QuotaValueType] = {CONNECTION_CREATION_RATE: "int"}

USER, CLIENT_ID, IP = "user", "client-id", "ip"  # ClientQuotaEntity types on the wire


def java_double(value: float) -> str:
    """Java's Double.toString, the form Kafka stores double quota values in (50.0, 1.0E7, 1.0E-4):
    the shortest digits that read back the same value, plain between 1e-3 and 1e7."""
    if math.isinf(value) or math.isnan(value):
        return "NaN" if math.isnan(value) else "Infinity" if value > 0 else "-Infinity"
    if value == 0 or 1e-3 <= abs(value) < 1e7:
        text = f"{Decimal(repr(float(value))):f}"
        return text if "." in text else text + ".0"
    sign, digits, exponent = Decimal(repr(float(value))).normalize().as_tuple()
    assert isinstance(exponent, int)
    text = "".join(map(str, digits))
    return f"{'-' if sign else ''}{text[0]}.{text[1:] or '0'}E{len(text) + exponent - 1}"


def stored_value(key: str, value: float, kinds: dict[str, QuotaValueType]) -> str:
    """The string Kafka writes for a quota value; ValueError when a long/int key gets a fraction."""
    kind = kinds[key]
    if kind == "double":
        return java_double(value)
    integral = int(value + 1e-6) if value >= 0 else int(value - 1e-6)
    if abs(integral - value) > 1e-6:
        raise ValueError(f"Configuration {key} must be a {kind.upper()} value")
    return str(integral)
