"""The BROKER_LOGGER config resource over Python logging (Kafka's Log4jController).

Levels are reported and accepted with log4j's names; Python has no FATAL/TRACE, so FATAL maps
to CRITICAL and TRACE to DEBUG.
"""
from __future__ import annotations

import logging

ROOT_LOGGER = "root"
VALID_LOG_LEVELS = ("FATAL", "ERROR", "WARN", "INFO", "DEBUG", "TRACE")
_TO_PYTHON = {"FATAL": logging.CRITICAL, "ERROR": logging.ERROR, "WARN": logging.WARNING,
              "INFO": logging.INFO, "DEBUG": logging.DEBUG, "TRACE": logging.DEBUG}
_FROM_PYTHON = {logging.CRITICAL: "FATAL", logging.ERROR: "ERROR", logging.WARNING: "WARN",
                logging.INFO: "INFO", logging.DEBUG: "DEBUG"}


def _logger(name: str) -> logging.Logger:
    return logging.getLogger() if name == ROOT_LOGGER else logging.getLogger(name)


def level_name(level: int) -> str:
    for threshold in sorted(_FROM_PYTHON, reverse=True):
        if level >= threshold:
            return _FROM_PYTHON[threshold]
    return "TRACE"


def loggers() -> dict[str, str]:
    """Every known logger with its effective level."""
    names = [n for n, obj in logging.root.manager.loggerDict.items() if isinstance(obj, logging.Logger)]
    result = {ROOT_LOGGER: level_name(logging.getLogger().getEffectiveLevel())}
    result.update({n: level_name(logging.getLogger(n).getEffectiveLevel()) for n in sorted(names)})
    return result


def logger_exists(name: str) -> bool:
    return name == ROOT_LOGGER or isinstance(logging.root.manager.loggerDict.get(name), logging.Logger)


def set_level(name: str, level: str) -> None:
    _logger(name).setLevel(_TO_PYTHON[level])


def unset_level(name: str) -> None:
    _logger(name).setLevel(logging.NOTSET)
