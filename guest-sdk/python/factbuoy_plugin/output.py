"""Writing artifacts: named files streamed to the host chunk by chunk."""

import json
from types import TracebackType
from typing import Any, Iterable, Optional, Type, Union

from componentize_py_types import Err
from wit_world.imports import output as wit

from .errors import Failed

# Largest chunk handed to the host in one call. The host refuses chunks above its own per-call
# limit (1 MiB by default); staying well below it keeps each call cheap.
CHUNK_BYTES = 64 * 1024


def _message(error: Any) -> str:
    if isinstance(error, wit.OutputError_InvalidName):
        return f"invalid artifact name: {error.value}"
    if isinstance(error, wit.OutputError_LimitExceeded):
        return f"limit exceeded: {error.value}"
    if isinstance(error, wit.OutputError_Io):
        return f"host could not store output: {error.value}"
    return "artifact already finished"


def _failed(err: Err[Any]) -> Failed:
    return Failed(f"writing output: {_message(err.value)}")


class Artifact:
    """One artifact being written; a binary file-like object. Use it in a ``with`` block, or call
    :meth:`close` to finish it and learn about errors."""

    def __init__(self, name: str, media_type: str):
        try:
            self._inner = wit.create(name, media_type)
        except Err as err:
            raise _failed(err) from None
        self._buffer = bytearray()

    def write(self, data: Union[bytes, bytearray, str]) -> int:
        """Appends ``bytes`` (or ``str``, encoded as UTF-8), sent in chunks of ``CHUNK_BYTES``."""
        if isinstance(data, str):
            data = data.encode()
        self._buffer += data
        while len(self._buffer) >= CHUNK_BYTES:
            self._send(bytes(self._buffer[:CHUNK_BYTES]))
            del self._buffer[:CHUNK_BYTES]
        return len(data)

    def close(self) -> None:
        """Sends what is buffered and marks the artifact complete."""
        if self._buffer:
            self._send(bytes(self._buffer))
            self._buffer.clear()
        try:
            self._inner.finish()
        except Err as err:
            raise _failed(err) from None

    def _send(self, chunk: bytes) -> None:
        try:
            self._inner.write(chunk)
        except Err as err:
            raise _failed(err) from None

    def __enter__(self) -> "Artifact":
        return self

    def __exit__(
        self,
        exc_type: Optional[Type[BaseException]],
        exc: Optional[BaseException],
        tb: Optional[TracebackType],
    ) -> None:
        if exc_type is None:
            self.close()


def create(name: str, media_type: str) -> Artifact:
    """Starts an artifact named ``name`` (a relative path such as ``facts.json`` or
    ``logs/kern.json``) with the given media type."""
    return Artifact(name, media_type)


def write_bytes(name: str, media_type: str, data: bytes) -> None:
    """Writes one whole artifact."""
    with create(name, media_type) as artifact:
        artifact.write(data)


def write_text(name: str, text: str, media_type: str = "text/plain; charset=utf-8") -> None:
    """Writes one whole text artifact, UTF-8."""
    write_bytes(name, media_type, text.encode())


def write_json(name: str, value: Any, pretty: bool = False) -> None:
    """Writes ``value`` as one JSON artifact, compact unless ``pretty``, ending in a newline."""
    with create(name, "application/json") as artifact:
        encoder = json.JSONEncoder(indent=2 if pretty else None, ensure_ascii=False)
        for piece in encoder.iterencode(value):
            artifact.write(piece)
        artifact.write(b"\n")


def write_json_lines(name: str, rows: Iterable[Any]) -> None:
    """Writes ``rows`` as a JSON Lines artifact (``application/jsonl``, a table: declare it with
    ``Artifact.table``), one compact JSON value per line."""
    with create(name, "application/jsonl") as artifact:
        encoder = json.JSONEncoder(ensure_ascii=False)
        for row in rows:
            artifact.write(encoder.encode(row))
            artifact.write(b"\n")
