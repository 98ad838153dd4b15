"""Typed access to the parameters ``gather`` receives."""

from typing import Dict, List, Optional, Tuple

from wit_world.imports import types

from .errors import InvalidParameters

_TYPES = {
    "string": types.ParamValue_String,
    "integer": types.ParamValue_Integer,
    "float": types.ParamValue_Float,
    "boolean": types.ParamValue_Boolean,
    "duration": types.ParamValue_Duration,
    "string-list": types.ParamValue_StringList,
}


class Params:
    """The parameters of one ``gather`` call. The host has already checked them against
    ``describe``, so a type mismatch here means the plugin asked for a parameter under the wrong
    type: the accessors raise :class:`InvalidParameters` naming the parameter."""

    def __init__(self, values: List[Tuple[str, types.ParamValue]]):
        self._values: Dict[str, types.ParamValue] = dict(values)

    def __contains__(self, name: str) -> bool:
        """Whether the parameter has a value (given or defaulted)."""
        return name in self._values

    def string(self, name: str) -> str:
        """A text parameter that has a value (required, or with a default)."""
        return self._required(name, self.opt_string(name))

    def opt_string(self, name: str) -> Optional[str]:
        """A text parameter that may be absent."""
        return self._typed(name, "string")

    def integer(self, name: str) -> int:
        """An integer parameter that has a value."""
        return self._required(name, self.opt_integer(name))

    def opt_integer(self, name: str) -> Optional[int]:
        """An integer parameter that may be absent."""
        return self._typed(name, "integer")

    def float(self, name: str) -> float:
        """A float parameter that has a value."""
        return self._required(name, self.opt_float(name))

    def opt_float(self, name: str) -> Optional[float]:
        """A float parameter that may be absent."""
        return self._typed(name, "float")

    def boolean(self, name: str) -> bool:
        """A boolean parameter that has a value."""
        return self._required(name, self.opt_boolean(name))

    def opt_boolean(self, name: str) -> Optional[bool]:
        """A boolean parameter that may be absent."""
        return self._typed(name, "boolean")

    def duration_seconds(self, name: str) -> float:
        """A duration parameter that has a value, in seconds (the host passes milliseconds)."""
        return self._required(name, self.opt_duration_seconds(name))

    def opt_duration_seconds(self, name: str) -> Optional[float]:
        """A duration parameter that may be absent, in seconds."""
        ms = self._typed(name, "duration")
        return None if ms is None else ms / 1000

    def string_list(self, name: str) -> List[str]:
        """A list parameter; empty when absent."""
        return list(self._typed(name, "string-list") or [])

    def _typed(self, name: str, type_name: str):
        value = self._values.get(name)
        if value is None:
            return None
        if not isinstance(value, _TYPES[type_name]):
            raise InvalidParameters(
                f"parameter `{name}` is not of type {type_name}; "
                "the plugin's describe and gather disagree"
            )
        return value.value

    @staticmethod
    def _required(name: str, value):
        if value is None:
            raise InvalidParameters(
                f"parameter `{name}` has no value; declare it required or give it a default"
            )
        return value
