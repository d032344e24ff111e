"""KafkaPrincipal and the principal a connection authenticates as (Kafka's DefaultKafkaPrincipalBuilder).

PLAINTEXT and SSL without a client certificate are ``User:ANONYMOUS``; SSL with a client
certificate maps the certificate's subject (RFC 2253, as Java's X500Principal.getName prints it)
through ``ssl.principal.mapping.rules``; SASL is ``User:<authorization id>``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

USER_TYPE = "User"


@dataclass(frozen=True, slots=True)
class KafkaPrincipal:
    principal_type: str
    name: str
    # Authenticated with a delegation token; not part of the principal's identity (Kafka's equals ignores it).
    token_authenticated: bool = field(default=False, compare=False)

    def __str__(self) -> str:
        return f"{self.principal_type}:{self.name}"

    @classmethod
    def parse(cls, text: str) -> KafkaPrincipal:
        """``Type:name`` (Kafka's SecurityUtils.parseKafkaPrincipal); ValueError if there is no type."""
        principal_type, sep, name = text.partition(":")
        if not sep or not principal_type or not name:
            raise ValueError(f"expected a string in format principalType:principalName but got {text!r}")
        return cls(principal_type, name)


ANONYMOUS = KafkaPrincipal(USER_TYPE, "ANONYMOUS")
WILDCARD = KafkaPrincipal(USER_TYPE, "*")


class NoMatchingRule(ValueError):
    pass


_RULE_PATTERN = r"(DEFAULT)|RULE:((?:\\.|[^\\/])*)/((?:\\.|[^\\/])*)/([LU]?).*?|(.*?)"
_RULE_SPLITTER = re.compile(r"\s*(" + _RULE_PATTERN + r")\s*(?:,\s*|$)")
_RULE_PARSER = re.compile(_RULE_PATTERN)
_DIGITS = re.compile(r"\d+")


@dataclass(frozen=True)
class _Rule:
    pattern: re.Pattern[str] | None  # None: DEFAULT
    replacement: str = ""
    case: str = ""

    def apply(self, dn: str) -> str | None:
        if self.pattern is None:
            return dn
        match = self.pattern.fullmatch(dn)
        if match is None:
            return None
        result = self.pattern.sub(_java_replacement(self.replacement, self.pattern.groups), dn)
        return result.lower() if self.case == "L" else result.upper() if self.case == "U" else result


def _java_replacement(replacement: str, groups: int) -> str:
    """Java's replacement syntax for Python's ``re.sub``: ``$n`` takes as many digits as name an
    existing group; a reference past the last group stays literal (Kafka's
    escapeLiteralBackReferences); ``\\x`` is a literal x."""
    out: list[str] = []
    i = 0
    while i < len(replacement):
        ch = replacement[i]
        if ch == "\\" and i + 1 < len(replacement):
            out.append(replacement[i + 1].replace("\\", "\\\\"))
            i += 2
            continue
        digits = _DIGITS.match(replacement, i + 1) if ch == "$" else None
        if digits:
            text = digits.group()
            index, used = int(text[0]), 1
            while used < len(text) and index * 10 + int(text[used]) <= groups:
                index, used = index * 10 + int(text[used]), used + 1
            if index <= groups:
                out.append(f"\\g<{index}>")
                i += 1 + used
                continue
        out.append(ch.replace("\\", "\\\\"))
        i += 1
    return "".join(out)


class SslPrincipalMapper:
    """``ssl.principal.mapping.rules``: the first rule matching the distinguished name gives the name."""

    def __init__(self, rules: str | None) -> None:
        text = "DEFAULT" if rules is None else rules.strip()
        self.rules: list[_Rule] = []
        for match in _RULE_SPLITTER.finditer(text):
            rule = match.group(1)
            if match.start() == match.end():
                break
            parsed = _RULE_PARSER.match(rule)
            if parsed is None or parsed.end() != len(rule):
                raise ValueError(f"Invalid rule: {rule}")
            if parsed.group(1):
                self.rules.append(_Rule(None))
            elif parsed.group(2) is not None:
                self.rules.append(_Rule(re.compile(parsed.group(2)), parsed.group(3), parsed.group(4)))
            elif parsed.group(5):
                raise ValueError(f"Invalid rule: {rule}")

    def name(self, distinguished_name: str) -> str:
        for rule in self.rules:
            result = rule.apply(distinguished_name)
            if result is not None:
                return result
        raise NoMatchingRule(f"No rules apply to {distinguished_name}")


# Java's X500Principal RFC 2253 keywords; other attributes print as dotted OIDs.
_RFC2253_KEYWORDS = {"2.5.4.3": "CN", "2.5.4.6": "C", "2.5.4.7": "L", "2.5.4.8": "ST", "2.5.4.10": "O",
                     "2.5.4.11": "OU", "2.5.4.9": "STREET", "0.9.2342.19200300.100.1.25": "DC",
                     "0.9.2342.19200300.100.1.1": "UID"}


def certificate_subject(der: bytes) -> str:
    """The subject of a DER certificate as Java's ``X500Principal.getName()`` (RFC 2253) prints it."""
    from cryptography import x509

    subject = x509.load_der_x509_certificate(der).subject
    return subject.rfc4514_string({oid: name for oid, name in
                                   ((x509.ObjectIdentifier(k), v) for k, v in _RFC2253_KEYWORDS.items())})
