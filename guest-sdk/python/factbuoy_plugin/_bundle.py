"""What a plugin's interpreter has at run time, which is not what it had when it was built.

componentize-py runs ``app.py`` when it builds the component, with the project and the standard
library as folders (``/0``, ``/1``, ..., ``/python``), and keeps the interpreter as it is then:
every module imported so far, compiled. At run time those folders are gone; a path the plugin
opens is a path on the host, which the sandbox refuses and reports (``opened /0/app.py, which is
not granted``). So, at run time, this module:

- formats tracebacks from the sources read at build time (:func:`keep_sources`), never opening a
  file, and names each file as the project does (``app.py``, not ``/0/app.py``);
- makes an import of a module that was not bundled fail at once (:func:`seal_imports`), instead
  of searching the host's file system, and says what to do about it (:func:`not_bundled_hint`).
"""

import importlib.machinery
import linecache
import os
import sys
import traceback
from typing import List, Optional, Tuple


def _bundle_roots() -> Tuple[str, ...]:
    """The folders the project and its packages were bundled from (``/0/``, ``/1/``, ...): every
    entry of ``sys.path`` but the standard library's, as prefixes."""
    stdlib = os.path.dirname(os.__file__) + "/"
    prefixes = (p.rstrip("/") + "/" for p in sys.path if p)
    return tuple(p for p in prefixes if not stdlib.startswith(p))


# What the import system searched at build time, kept for run time, when it is cleared.
_ROOTS = _bundle_roots()


def keep_sources() -> None:
    """Reads the sources of the modules imported from the bundle's folders into ``linecache``,
    at build time, so that run-time tracebacks show their lines. (An entry without a
    modification time is never checked against a file.)"""
    roots = _ROOTS
    for module in list(sys.modules.values()):
        path = getattr(module, "__file__", None)
        if not path or not path.startswith(roots) or path in linecache.cache:
            continue
        try:
            with open(path, encoding="utf-8") as source:
                lines = source.readlines()
        except (OSError, UnicodeDecodeError):
            continue
        linecache.cache[path] = (sum(map(len, lines)), None, lines, path)


def _never_read(*_args: object, **_kwargs: object) -> List[str]:
    """``linecache.updatecache`` at run time: no source is on the host."""
    return []


def _without_columns(exception: traceback.TracebackException) -> None:
    """Drops the column positions of every frame of ``exception`` and of the exceptions it
    chains: without them a frame is printed without carets (``~~^^``), whose placement parses
    the line and, when that fails, makes CPython open the "file" ``<unknown>`` for its text."""
    seen = set()
    pending: List[Optional[traceback.TracebackException]] = [exception]
    while pending:
        current = pending.pop()
        if current is None or id(current) in seen:
            continue
        seen.add(id(current))
        for frame in current.stack:
            frame.colno = frame.end_colno = None
        pending += [current.__cause__, current.__context__, *(current.exceptions or [])]


def format_traceback(error: BaseException, skip: int = 0) -> str:
    """The traceback of ``error``, as Python prints it (without carets), without its first
    ``skip`` frames (the SDK's own), with the lines :func:`keep_sources` kept and the project's
    own file names; no file is opened."""
    frames = error.__traceback__
    for _ in range(skip):
        frames = frames.tb_next if frames and frames.tb_next else frames
    saved = linecache.updatecache
    linecache.updatecache = _never_read
    try:
        exception = traceback.TracebackException(type(error), error, frames)
        _without_columns(exception)
        text = "".join(exception.format())
    finally:
        linecache.updatecache = saved
    for root in _ROOTS:
        text = text.replace(f'File "{root}', 'File "')
    return text


def seal_imports() -> None:
    """In the component (``sys.platform`` is ``wasi``), stops imports from searching
    ``sys.path``: the bundle's folders are not there, and the search would only open paths
    on the host. A module imported at build time is in ``sys.modules``; the built-in and frozen
    ones stay importable; any other import raises ``ModuleNotFoundError`` at once, which
    :func:`not_bundled_hint` explains."""
    if sys.platform == "wasi":
        sys.meta_path[:] = [f for f in sys.meta_path if f is not importlib.machinery.PathFinder]
        # Nor may anything else look for modules there (a ModuleNotFoundError's traceback
        # searches sys.path for a module built for another Python).
        sys.path.clear()


def not_bundled_hint(error: BaseException) -> str:
    """What to do about ``error`` when it is an import of a module that was not bundled, else
    ``""``."""
    if not isinstance(error, ModuleNotFoundError) or not error.name:
        return ""
    top = error.name.partition(".")[0]
    return (
        f"componentize-py bundles only the modules imported while app.py is loaded at build "
        f"time: import {top} at the top of app.py (or of a module it imports), then build again"
    )
