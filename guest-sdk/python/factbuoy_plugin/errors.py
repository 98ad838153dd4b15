"""Failures a plugin understood, as opposed to a crash. Raise one from ``gather``."""

from wit_world.imports import types


class GatherError(Exception):
    """Base class of the failures ``gather`` may raise; use one of its subclasses."""

    def to_wit(self) -> types.GatherError:
        return types.GatherError_Failed(str(self))


class InvalidParameters(GatherError):
    """The parameters were acceptable to the host but not to the plugin."""

    def to_wit(self) -> types.GatherError:
        return types.GatherError_InvalidParameters(str(self))


class Unavailable(GatherError):
    """What the plugin gathers does not exist here (no such file, a capability not granted)."""

    def to_wit(self) -> types.GatherError:
        return types.GatherError_Unavailable(str(self))


class Failed(GatherError):
    """Anything else; the message says what went wrong."""
