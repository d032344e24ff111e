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


def parse_jaas_file(text: str) -> dict[str, list[JaasModule]]:
    """The sections of a JAAS login configuration file (``java.security.auth.login.config``):
    ``Name { <module> <flag> key="value" ...; ... };``, comments (``//``, ``/* */``) allowed."""
    sections: dict[str, list[JaasModule]] = {}
    text = _strip_comments(text)
    pos = 0
    while True:
        match = _SECTION.match(text, pos)
        if match is None:
            if text[pos:].strip():
                raise JaasConfigError(f"expected a login context name and '{{' at {pos} in the JAAS file")
            return sections
        end = _closing_brace(text, match.end())
        sections[match.group(1)] = parse_jaas_config(text[match.end():end])
        after = _SECTION_END.match(text, end + 1)
        if after is None:
            raise JaasConfigError(f"the login context {match.group(1)} must end with '}};'")
        pos = after.end()


_SECTION = re.compile(r"\s*([A-Za-z0-9_.$-]+)\s*\{")
_SECTION_END = re.compile(r"\s*;")


def _strip_comments(text: str) -> str:
    out, pos, quoted = [], 0, False
    while pos < len(text):
        char = text[pos]
        if char == '"' and (pos == 0 or text[pos - 1] != "\\"):
            quoted = not quoted
        elif not quoted and text.startswith("//", pos):
            newline = text.find("\n", pos)
            pos = newline if newline >= 0 else len(text)
            continue
        elif not quoted and text.startswith("/*", pos):
            close = text.find("*/", pos + 2)
            if close < 0:
                raise JaasConfigError("unterminated comment in the JAAS file")
            pos = close + 2
            continue
        out.append(char)
        pos += 1
    return "".join(out)


def _closing_brace(text: str, pos: int) -> int:
    quoted = False
    for index in range(pos, len(text)):
        char = text[index]
        if char == '"' and text[index - 1] != "\\":
            quoted = not quoted
        elif char == "}" and not quoted:
            return index
    raise JaasConfigError("a login context in the JAAS file is missing its '}'")
