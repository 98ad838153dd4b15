"""Typed access to the parameters ``gather`` receives."""

import builtins
from typing import Dict, List, Optional, Tuple, Type, TypeVar

from wit_world.imports import types

from .errors import InvalidParameters

# Each variant of the contract's param-value, by the name the contract gives its type.
_TYPE_NAMES: Dict[type, str] = {
    types.ParamValue_String: "string",
    types.ParamValue_Integer: "integer",
    types.ParamValue_Float: "float",
    types.ParamValue_Boolean: "boolean",
    types.ParamValue_Duration: "duration",
    types.ParamValue_StringList: "string-list",
}

_Variant = TypeVar(
    "_Variant",
    types.ParamValue_String,
    types.ParamValue_Integer,
    types.ParamValue_Float,
    types.ParamValue_Boolean,
    types.ParamValue_Duration,
    types.ParamValue_StringList,
)
_T = TypeVar("_T")


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
        value = self._typed(name, types.ParamValue_String)
        return None if value is None else value.value

    def integer(self, name: str) -> int:
        """An integer parameter that has a value."""
        return self._required(name, self.opt_integer(name))

    def opt_integer(self, name: str) -> Optional[int]:
        """An integer parameter that may be absent."""
        value = self._typed(name, types.ParamValue_Integer)
        return None if value is None else value.value

    # In this class `float` is the method below, so the type is spelt `builtins.float`.
    def float(self, name: str) -> builtins.float:
        """A float parameter that has a value."""
        return self._required(name, self.opt_float(name))

    def opt_float(self, name: str) -> Optional[builtins.float]:
        """A float parameter that may be absent."""
        value = self._typed(name, types.ParamValue_Float)
        return None if value is None else value.value

    def boolean(self, name: str) -> bool:
        """A boolean parameter that has a value."""
        return self._required(name, self.opt_boolean(name))

    def opt_boolean(self, name: str) -> Optional[bool]:
        """A boolean parameter that may be absent."""
        value = self._typed(name, types.ParamValue_Boolean)
        return None if value is None else value.value

    def duration_seconds(self, name: str) -> builtins.float:
        """A duration parameter that has a value, in seconds (the host passes milliseconds)."""
        return self._required(name, self.opt_duration_seconds(name))

    def opt_duration_seconds(self, name: str) -> Optional[builtins.float]:
        """A duration parameter that may be absent, in seconds."""
        value = self._typed(name, types.ParamValue_Duration)
        return None if value is None else value.value / 1000

    def string_list(self, name: str) -> List[str]:
        """A list parameter; empty when absent."""
        value = self._typed(name, types.ParamValue_StringList)
        return [] if value is None else list(value.value)

    def _typed(self, name: str, variant: Type[_Variant]) -> Optional[_Variant]:
        value = self._values.get(name)
        if value is None:
            return None
        if not isinstance(value, variant):
            raise InvalidParameters(
                f"parameter `{name}` is not of type {_TYPE_NAMES[variant]}; "
                "the plugin's describe and gather disagree"
            )
        return value

    @staticmethod
    def _required(name: str, value: Optional[_T]) -> _T:
        if value is None:
            raise InvalidParameters(
                f"parameter `{name}` has no value; declare it required or give it a default"
            )
        return value

