"""Kafka's ``sasl.jaas.config`` values: ``<LoginModule class> <flag> key="value" ...;``.

Only the options matter here: PlainLoginModule's ``username``/``password`` (what this broker
sends to others) and ``user_<name>="<password>"`` (the users it accepts), ScramLoginModule's
``username``/``password``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

PLAIN_LOGIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
SCRAM_LOGIN_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"
_FLAGS = ("required", "requisite", "sufficient", "optional")
_TOKEN = re.compile(r'\s*(?:"((?:[^"\\]|\\.)*)"|([^\s=;"]+)|(=)|(;))', re.S)


class JaasConfigError(ValueError):
    pass


@dataclass
class JaasModule:
    login_module: str
    flag: str
    options: dict[str, str] = field(default_factory=dict)

    def users(self) -> dict[str, str]:
        """PlainLoginModule's ``user_<name>`` options: the users a PLAIN listener accepts."""
        return {key[5:]: value for key, value in self.options.items() if key.startswith("user_")}


def parse_jaas_config(text: str) -> list[JaasModule]:
    """Parse a JAAS config value (Kafka's JaasConfig); JaasConfigError says what is wrong."""
    tokens: list[tuple[str, str]] = []
    pos = 0
    text = text.strip()
    while pos < len(text):
        match = _TOKEN.match(text, pos)
        if match is None:
            if text[pos:].strip() == "":
                break
            raise JaasConfigError(f"unexpected character at {pos} in the JAAS config")
        quoted, word, equals, semicolon = match.groups()
        if quoted is not None:
            tokens.append(("value", re.sub(r"\\(.)", r"\1", quoted)))
        elif word is not None:
            tokens.append(("word", word))
        elif equals:
            tokens.append(("=", "="))
        else:
            tokens.append((";", ";"))
        pos = match.end()
    modules: list[JaasModule] = []
    i = 0
    while i < len(tokens):
        if i + 1 >= len(tokens) or tokens[i][0] != "word" or tokens[i + 1][1].lower() not in _FLAGS:
            raise JaasConfigError("expected a login module class and a control flag")
        module = JaasModule(tokens[i][1], tokens[i + 1][1].lower())
        i += 2
        while i < len(tokens) and tokens[i][0] != ";":
            if i + 2 >= len(tokens) or tokens[i][0] != "word" or tokens[i + 1][0] != "=":
                raise JaasConfigError(f"invalid option in the JAAS config of {module.login_module}")
            module.options[tokens[i][1]] = tokens[i + 2][1]
            i += 3
        if i >= len(tokens):
            raise JaasConfigError("the JAAS config must end with ';'")
        modules.append(module)
        i += 1
    if not modules:
        raise JaasConfigError("the JAAS config names no login module")
    return modules
