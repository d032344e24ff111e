"""Throughput over SSL and SASL_SSL next to PLAINTEXT on the same broker, and the cost of a login.

Starts its own ZooKeeper and one broker with PLAINTEXT, SSL and SASL_SSL (SCRAM-SHA-512) listeners
(certificates made in the temp dir), then:
- produces and consumes the same number of 1 KiB values on each listener with confluent-kafka
  (librdkafka; acks=1, assign() from offset 0), in interleaved rounds: the best messages/s and MB/s
  of each, each as a share of PLAINTEXT, and the broker process's CPU seconds per GB (median), which
  other load on the machine does not skew as it skews throughput;
- times complete logins on fresh connections (TCP, TLS where used, SASL): PLAINTEXT, SSL, SASL_PLAINTEXT
  with PLAIN / SCRAM-SHA-256 / SCRAM-SHA-512, SASL_SSL with SCRAM-SHA-512 (median ms of ``--logins``),
  next to the client's own PBKDF2 (4096 iterations), which is part of every SCRAM login.

    python bench/security_bench.py [--messages N] [--logins N] [--rounds N]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from broker_bench import broker_cpu_seconds, consume, create_topic, produce  # noqa: E402

from broker.security.client_security import ClientSecurity  # noqa: E402
from broker.security.scram import SCRAM_MECHANISMS  # noqa: E402
from broker.security.ssl_factory import SslFactory, SslSettings  # noqa: E402
from bench import bench_json  # noqa: E402
from tests.harness.broker import BrokerProcess  # noqa: E402
from tests.harness.certs import TestPki  # noqa: E402
from tests.harness.zookeeper import ZooKeeperServer  # noqa: E402
from tests.integration.security.security_setup import (  # noqa: E402
    PASSWORDS,
    create_scram_users,
    librdkafka_config,
    secure_broker_overrides,
)

LISTENERS = ("SSL", "SASL_PLAINTEXT", "SASL_SSL")


def _client_security(pki: TestPki, protocol: str, mechanism: str | None) -> ClientSecurity:
    factory = None
    if protocol.endswith("SSL"):
        factory = SslFactory.for_client(SslSettings("client", "PEM", None, None, None, None, None, "PEM",
                                                    str(pki.ca_file), None, None, "none", ["TLSv1.2", "TLSv1.3"], [],
                                                    "https"))
    user = "bob" if mechanism == "PLAIN" else "alice"
    return ClientSecurity(protocol, factory, mechanism, user if mechanism else "", PASSWORDS[user] if mechanism else "")


def login_ms(broker: BrokerProcess, pki: TestPki, protocol: str, mechanism: str | None, count: int) -> float:
    """Median ms from connect to a connection ready for requests (TLS handshake and SASL included)."""
    security = _client_security(pki, protocol, mechanism)
    port = broker.port if protocol == "PLAINTEXT" else broker.listener_ports[protocol]
    samples = []
    for _ in range(count):
        start = time.perf_counter()
        sock = security.connect_blocking("127.0.0.1", port, 10, "bench")
        samples.append((time.perf_counter() - start) * 1000)
        sock.close()
    return statistics.median(samples)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--messages", type=int, default=200_000, help="1 KiB messages per throughput run")
    parser.add_argument("--logins", type=int, default=200, help="logins timed per kind")
    parser.add_argument("--rounds", type=int, default=3, help="throughput rounds (the best is reported)")
    parser.add_argument("--json", metavar="FILE", help="also write the rows as JSON (for bench/charts.py)")
    args = parser.parse_args()
    print("command: python bench/security_bench.py " + " ".join(sys.argv[1:]))
    with tempfile.TemporaryDirectory() as tmp:
        zk = ZooKeeperServer(Path(tmp) / "zk")
        zk.start()
        pki = TestPki(Path(tmp) / "pki")
        create_scram_users(zk.connect_string)
        broker = BrokerProcess(zk.connect_string, 0, tmp,
                               secure_broker_overrides(pki, pki.issue("broker", "CN=localhost").pem_bundle),
                               extra_listeners=LISTENERS)
        try:
            broker.start()
            print(f"{'test (1 KiB values, best of ' + str(args.rounds) + ')':<30}{'messages/s':>12}{'MB/s':>9}"
                  f"{'of PLAINTEXT':>14}{'broker CPU s/GB':>17}")
            runs = (("PLAINTEXT", None), ("SSL", None), ("SASL_SSL", "SCRAM-SHA-512"))
            best: dict[tuple[str, str], float] = {}
            cpu_per_gb: dict[tuple[str, str], list[float]] = {}
            for round_ in range(args.rounds):  # interleaved, so that load from elsewhere hits all alike
                for listener, mechanism in runs:
                    topic = f"bench-{listener.lower()}-{round_}"
                    create_topic(broker.bootstrap, topic, 1)
                    config = {} if listener == "PLAINTEXT" else librdkafka_config(listener, mechanism, "alice", pki)
                    bootstrap = broker.bootstrap if listener == "PLAINTEXT" else broker.bootstrap_for(listener)
                    for kind in ("produce", "consume"):
                        cpu = broker_cpu_seconds(broker)
                        seconds = (produce(bootstrap, topic, args.messages, 1024, config, warm=True) if kind == "produce"
                                   else consume(bootstrap, topic, 1, args.messages, config))
                        cpu = broker_cpu_seconds(broker) - cpu
                        best[(kind, listener)] = max(best.get((kind, listener), 0.0), args.messages / seconds)
                        cpu_per_gb.setdefault((kind, listener), []).append(cpu / (args.messages * 1024 / 1e9))
            rows: list[dict[str, object]] = []
            for kind in ("produce", "consume"):
                for listener, _ in runs:
                    rate = best[(kind, listener)]
                    rows.append({"name": f"{kind} {listener}, 1 KiB values", "unit": "messages/s", "value": rate,
                                 "broker_cpu_s_per_gb": statistics.median(cpu_per_gb[(kind, listener)])})
                    print(f"{f'{kind} {listener}':<30}{rate:>12,.0f}{rate * 1024 / 1e6:>9.1f}"
                          f"{rate / best[(kind, 'PLAINTEXT')]:>13.0%}"
                          f"{statistics.median(cpu_per_gb[(kind, listener)]):>17.2f}")
            print(f"\n{'login on a new connection':<40}{'median ms':>10}")
            for protocol, mechanism in (("PLAINTEXT", None), ("SSL", None), ("SASL_PLAINTEXT", "PLAIN"),
                                        ("SASL_PLAINTEXT", "SCRAM-SHA-256"), ("SASL_PLAINTEXT", "SCRAM-SHA-512"),
                                        ("SASL_SSL", "SCRAM-SHA-512")):
                label = protocol + (f" {mechanism}" if mechanism else "")
                milliseconds = login_ms(broker, pki, protocol, mechanism, args.logins)
                print(f"{label:<40}{milliseconds:>10.2f}")
                rows.append({"name": f"login on a new connection, {label}", "unit": "median ms", "value": milliseconds})
            for name, mechanism in SCRAM_MECHANISMS.items():
                samples = []
                for _ in range(args.logins):
                    start = time.perf_counter()
                    mechanism.salted_password("alice-secret", b"salt" * 8, 4096)
                    samples.append((time.perf_counter() - start) * 1000)
                print(f"{f'  of which client PBKDF2 {name}':<40}{statistics.median(samples):>10.2f}")
                rows.append({"name": f"of which client PBKDF2 {name}", "unit": "median ms",
                             "value": statistics.median(samples)})
            if args.json:
                bench_json.write(args.json, "security_bench", "", rows)
        finally:
            broker.stop()
            zk.close()


if __name__ == "__main__":
    main()
