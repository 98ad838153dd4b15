"""Progress reports: shown by ``factbuoy plugin run`` and relayed to a run's status."""

from typing import List

from wit_world.imports import progress as wit


def report(completed: int, total: int, message: str) -> None:
    """Reports that ``completed`` of ``total`` units are done (``total`` 0 when unknown)."""
    _send(completed, total, message, [], [])


def warn(message: str) -> None:
    """Reports a problem that did not stop the plugin, for example a file it could not read."""
    _send(0, 0, "", [message], [])


def error(message: str) -> None:
    """Reports a problem that means part of the output is missing."""
    _send(0, 0, "", [], [message])


def _send(
    completed: int, total: int, message: str, warnings: List[str], errors: List[str]
) -> None:
    wit.report(
        wit.ProgressUpdate(
            completed=completed, total=total, message=message, warnings=warnings, errors=errors
        )
    )
