"""Certificates for TLS tests, made with ``cryptography`` in the test's own directory.

``TestPki(dir)`` makes a CA and, on demand, certificates signed by it (or by a second,
untrusted CA, or already expired) as PEM files and PKCS12 stores, with the subject and the
``localhost``/``127.0.0.1`` names a broker needs.
"""
from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.serialization import pkcs12
from cryptography.x509.oid import NameOID

PASSWORD = "changeit"


@dataclass(frozen=True)
class CertFiles:
    """One identity: key and chain as PEM (one file with both too) and as a PKCS12 store."""

    key: Path
    cert: Path
    pem_bundle: Path   # key + certificate chain: a Kafka PEM keystore
    pkcs12: Path       # password PASSWORD
    subject: str


def _name(subject: str) -> x509.Name:
    oids = {"CN": NameOID.COMMON_NAME, "OU": NameOID.ORGANIZATIONAL_UNIT_NAME, "O": NameOID.ORGANIZATION_NAME,
            "L": NameOID.LOCALITY_NAME, "ST": NameOID.STATE_OR_PROVINCE_NAME, "C": NameOID.COUNTRY_NAME}
    # RFC 2253 lists the most specific RDN first; X.509 stores it last.
    parts = [p.split("=", 1) for p in subject.split(",")]
    return x509.Name([x509.NameAttribute(oids[k.strip()], v.strip()) for k, v in reversed(parts)])


class TestPki:
    __test__ = False  # not a pytest class

    def __init__(self, directory: Path | str) -> None:
        self.dir = Path(directory)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.ca_key, self.ca_cert = self._ca("CN=Test CA,O=pykafka-broker tests")
        self.ca_file = self.dir / "ca.pem"
        self.ca_file.write_bytes(self.ca_cert.public_bytes(serialization.Encoding.PEM))
        self.other_ca_key, self.other_ca_cert = self._ca("CN=Untrusted CA")

    def _ca(self, subject: str) -> tuple[ec.EllipticCurvePrivateKey, x509.Certificate]:
        key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.datetime.now(datetime.timezone.utc)
        cert = (x509.CertificateBuilder().subject_name(_name(subject)).issuer_name(_name(subject))
                .public_key(key.public_key()).serial_number(x509.random_serial_number())
                .not_valid_before(now - datetime.timedelta(days=1)).not_valid_after(now + datetime.timedelta(days=30))
                .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
                .sign(key, hashes.SHA256()))
        return key, cert

    def issue(self, name: str, subject: str, *, untrusted: bool = False, expired: bool = False,
              dns_names: tuple[str, ...] | list[str] = ("localhost",)) -> CertFiles:
        """A key and certificate for ``subject``, with ``dns_names`` and 127.0.0.1 as its SANs."""
        key = ec.generate_private_key(ec.SECP256R1())
        ca_key, ca_cert = (self.other_ca_key, self.other_ca_cert) if untrusted else (self.ca_key, self.ca_cert)
        now = datetime.datetime.now(datetime.timezone.utc)
        start, end = ((now - datetime.timedelta(days=10), now - datetime.timedelta(days=1)) if expired
                      else (now - datetime.timedelta(days=1), now + datetime.timedelta(days=30)))
        cert = (x509.CertificateBuilder().subject_name(_name(subject)).issuer_name(ca_cert.subject)
                .public_key(key.public_key()).serial_number(x509.random_serial_number())
                .not_valid_before(start).not_valid_after(end)
                .add_extension(x509.SubjectAlternativeName([*(x509.DNSName(n) for n in dns_names),
                                                            x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
                               critical=False)
                .sign(ca_key, hashes.SHA256()))
        pem = serialization.Encoding.PEM
        key_pem = key.private_bytes(pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
        chain_pem = cert.public_bytes(pem) + ca_cert.public_bytes(pem)
        files = CertFiles(self.dir / f"{name}.key", self.dir / f"{name}.crt", self.dir / f"{name}-keystore.pem",
                          self.dir / f"{name}.p12", subject)
        files.key.write_bytes(key_pem)
        files.cert.write_bytes(chain_pem)
        files.pem_bundle.write_bytes(key_pem + chain_pem)
        files.pkcs12.write_bytes(pkcs12.serialize_key_and_certificates(
            name.encode(), key, cert, [ca_cert], serialization.BestAvailableEncryption(PASSWORD.encode())))
        return files

    def truststore_p12(self) -> Path:
        """The CA alone in a PKCS12 truststore as Java's keytool makes it (Java trusts only certificates
        carrying its trust attribute), password PASSWORD."""
        path = self.dir / "truststore.p12"
        if not path.exists():
            path.write_bytes(pkcs12.serialize_java_truststore(
                [pkcs12.PKCS12Certificate(self.ca_cert, b"ca")],
                serialization.BestAvailableEncryption(PASSWORD.encode())))
        return path
