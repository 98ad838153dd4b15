"""The class a plugin subclasses, and the one line that exports it."""

import sys
from typing import List, Tuple, Type

from componentize_py_types import Err
from wit_world import exports
from wit_world.imports import types

from . import _bundle, log
from .describe import Description
from .errors import GatherError
from .params import Params


class Gatherer:
    """What a plugin implements. Both methods are called in a fresh instance."""

    def describe(self) -> Description:
        """Says what the plugin is. Must not touch the host: it is called to list and plan runs."""
        raise NotImplementedError("a Gatherer must implement describe()")

    def gather(self, params: Params) -> None:
        """Gathers facts and writes them with :mod:`factbuoy_plugin.output`. Raise a
        :class:`GatherError` subclass to fail with a message."""
        raise NotImplementedError("a Gatherer must implement gather()")


def export(gatherer: Type[Gatherer]) -> Type[exports.Plugin]:
    """Exports a :class:`Gatherer` subclass as the plugin's entry points. Assign the result to
    ``Plugin`` at the top level of the app module: ``Plugin = export(MyGatherer)``
    (componentize-py looks the export up by that name)."""
    if not (isinstance(gatherer, type) and issubclass(gatherer, Gatherer)):
        raise TypeError(f"export() takes a Gatherer subclass, not {gatherer!r}")
    # Called while app.py is loaded at build time, when its sources are still files.
    _bundle.keep_sources()

    class Plugin(exports.Plugin):
        def describe(self) -> types.PluginInfo:
            _bundle.seal_imports()
            try:
                return gatherer().describe().to_wit()
            except Exception as error:
                # describe returns no error: componentize-py panics with a message that names
                # no exception, so the traceback goes to stderr, where the host finds it.
                sys.stderr.write(_bundle.format_traceback(error))
                raise

        def gather(self, params: List[Tuple[str, types.ParamValue]]) -> None:
            _bundle.seal_imports()
            try:
                gatherer().gather(Params(params))
            except GatherError as error:
                raise Err(error.to_wit()) from None
            except Exception as error:
                # A Python exception is a bug, like a Rust panic; the run fails with its type and
                # message (and what to do, for a module that was not bundled), and the traceback
                # from the gatherer on goes to the log for the author.
                message = f"{type(error).__name__}: {error}"
                hint = _bundle.not_bundled_hint(error)
                if hint:
                    error.add_note(hint)
                    message = f"{message} ({hint})"
                log.error(_bundle.format_traceback(error, skip=1).rstrip("\n"))
                raise Err(types.GatherError_Failed(message)) from None

    return Plugin
