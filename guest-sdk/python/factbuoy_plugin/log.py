"""Log records, shown by the host with the plugin's name attached."""

from wit_world.imports import logging as wit


def trace(message: str) -> None:
    """Detailed tracing, hidden unless the operator asks for it."""
    wit.log(wit.Level.TRACE, message)


def debug(message: str) -> None:
    """Diagnostics for plugin authors."""
    wit.log(wit.Level.DEBUG, message)


def info(message: str) -> None:
    """Normal operation."""
    wit.log(wit.Level.INFO, message)


def warn(message: str) -> None:
    """Something is off but the plugin carries on."""
    wit.log(wit.Level.WARN, message)


def error(message: str) -> None:
    """Something failed."""
    wit.log(wit.Level.ERROR, message)
