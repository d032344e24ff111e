"""The Kafka 4.2 share-group definitions against kio 0.6.5 (generated from Kafka 4.2).

For every message and version: a random object encoded by our codec is read by kio's
reader and written back byte for byte, and kio's bytes decode to the same object here.
A field missing, misplaced, of another width or nullability on either side breaks this.
"""

from __future__ import annotations

import importlib
import io
import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from message_strategies import MessageStrategies, versions_of
from protocol.api_keys import API_SPECS, ApiKey
from protocol.messages import message_class
from protocol.schema import FieldSpec
from protocol.schema_sources import NEWER_THAN_3_9

import kio.schema.errors as kio_errors  # noqa: E402 - a test dependency: kio 0.6.5 has Kafka 4.2's layouts
import kio.serial as kio_serial  # noqa: E402


class _KnownErrorCodes(MessageStrategies):
    """kio reads error codes into its ErrorCode enum, so they are drawn from Kafka's codes."""

    def scalar(self, f: FieldSpec) -> st.SearchStrategy[object]:
        if f.name.endswith("ErrorCode"):
            return st.sampled_from(sorted(int(code) for code in kio_errors.ErrorCode))
        return super().scalar(f)


def _kio_class(name: str, version: int) -> type:
    base = re.sub(r"(Request|Response)$", "", name)
    kind = name[len(base):].lower()
    module = importlib.import_module(f"kio.schema.{re.sub(r'(?<!^)(?=[A-Z])', '_', base).lower()}.v{version}.{kind}")
    return getattr(module, name)


@pytest.mark.parametrize("name", sorted(n for n in NEWER_THAN_3_9 if "Share" in n))
@settings(max_examples=20, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_layout_matches_kio(name: str, data: st.DataObject) -> None:
    cls = message_class(name)
    for version in versions_of(name):
        ours = data.draw(_KnownErrorCodes(name, version, unknown_tags=False).message(), label=f"v{version}")
        encoded = bytes(ours.encode(version))
        kio_cls = _kio_class(name, version)
        theirs, end = kio_serial.entity_reader(kio_cls)(memoryview(encoded), 0)
        assert end == len(encoded)
        assert _kio_bytes(kio_cls, theirs) == encoded
        assert cls.decode(encoded, version) == ours


def _kio_bytes(kio_cls: type, obj: object) -> bytes:
    out = io.BytesIO()
    kio_serial.entity_writer(kio_cls)(out, obj)
    return out.getvalue()


def test_version_ranges_are_kafka_42s() -> None:
    """The served ranges are exactly the versions kio (Kafka 4.2) has."""
    expected = {
        ApiKey.SHARE_GROUP_HEARTBEAT: (1, 1), ApiKey.SHARE_GROUP_DESCRIBE: (1, 1), ApiKey.SHARE_FETCH: (1, 2),
        ApiKey.SHARE_ACKNOWLEDGE: (1, 2), ApiKey.INITIALIZE_SHARE_GROUP_STATE: (0, 0),
        ApiKey.READ_SHARE_GROUP_STATE: (0, 0), ApiKey.WRITE_SHARE_GROUP_STATE: (0, 1),
        ApiKey.DELETE_SHARE_GROUP_STATE: (0, 0), ApiKey.READ_SHARE_GROUP_STATE_SUMMARY: (0, 1),
        ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS: (0, 1), ApiKey.ALTER_SHARE_GROUP_OFFSETS: (0, 0),
        ApiKey.DELETE_SHARE_GROUP_OFFSETS: (0, 0),
    }
    for key, (lo, hi) in expected.items():
        spec = API_SPECS[key]
        assert (spec.min_version, spec.max_version) == (lo, hi), key
        assert "zkBroker" in spec.listeners and not spec.latest_version_unstable
        for version in range(lo, hi + 1):
            _kio_class(spec.name + "Request", version)
        with pytest.raises(ModuleNotFoundError):
            _kio_class(spec.name + "Request", hi + 1)
