"""Builders for what a plugin says about itself in ``describe``."""

from dataclasses import dataclass
from typing import List, Optional

from wit_world.imports import types


@dataclass(frozen=True)
class Capability:
    """Something beyond pure computation that a plugin asks for."""

    read_path: Optional[str] = None

    @staticmethod
    def read(path: str) -> "Capability":
        """Read files below this absolute path, for example ``/proc``. The host maps it
        read-only onto the same path below the host root."""
        return Capability(read_path=path)

    def to_wit(self) -> types.Capability:
        if self.read_path is None:
            return types.Capability_HostInfo()
        return types.Capability_ReadPath(self.read_path)


# Call the host_info functions (no path: the one capability that is not a read grant).
Capability.HOST_INFO = Capability()  # type: ignore[attr-defined]


class Param:
    """One parameter a plugin accepts; start with the constructor for its type."""

    def __init__(self, name: str, param_type: types.ParamType):
        self._spec = types.ParamSpec(
            name=name, description="", type=param_type, required=False, default=None, secret=False
        )

    @classmethod
    def string(cls, name: str) -> "Param":
        """Any text."""
        return cls(name, types.ParamType.STRING)

    @classmethod
    def integer(cls, name: str) -> "Param":
        """A signed 64-bit integer."""
        return cls(name, types.ParamType.INTEGER)

    @classmethod
    def float(cls, name: str) -> "Param":
        """A 64-bit float."""
        return cls(name, types.ParamType.FLOAT)

    @classmethod
    def boolean(cls, name: str) -> "Param":
        """``true`` or ``false``."""
        return cls(name, types.ParamType.BOOLEAN)

    @classmethod
    def duration(cls, name: str) -> "Param":
        """A span of time such as ``60m``; read it with ``Params.duration_seconds``."""
        return cls(name, types.ParamType.DURATION)

    @classmethod
    def string_list(cls, name: str) -> "Param":
        """A list of text values, comma-separated or repeated on the command line."""
        return cls(name, types.ParamType.STRING_LIST)

    def describe(self, description: str) -> "Param":
        """What the parameter means, for ``factbuoy plugin info``."""
        self._spec.description = description
        return self

    def required(self) -> "Param":
        """The user must give a value."""
        self._spec.required = True
        return self

    def default(self, value: str) -> "Param":
        """The value used when the user gives none, written as a user would (``60m``, ``a,b``)."""
        self._spec.default = value
        return self

    def secret(self) -> "Param":
        """The host never logs the value nor writes it into a bundle."""
        self._spec.secret = True
        return self


class Description:
    """What a plugin is: its name, version, parameters, capabilities and artifacts."""

    def __init__(self, name: str, version: str, description: str):
        """``name`` is lower-case ``a-z``, ``0-9`` and ``-``; ``version`` is semver."""
        self._name = name
        self._version = version
        self._description = description
        self._parameters: List[types.ParamSpec] = []
        self._capabilities: List[types.CapabilityRequest] = []
        self._artifacts: List[types.ArtifactSpec] = []

    def param(self, param: Param) -> "Description":
        """Declares a parameter."""
        self._parameters.append(param._spec)
        return self

    def capability(self, capability: Capability, reason: str) -> "Description":
        """Asks for a capability ``gather`` cannot work without; the host refuses to run the
        plugin unless it is granted. ``reason`` is shown to the operator."""
        return self._request(capability, True, reason)

    def optional_capability(self, capability: Capability, reason: str) -> "Description":
        """Asks for a capability the plugin can do without (it must cope with its absence)."""
        return self._request(capability, False, reason)

    def _request(self, capability: Capability, required: bool, reason: str) -> "Description":
        self._capabilities.append(
            types.CapabilityRequest(capability=capability.to_wit(), required=required, reason=reason)
        )
        return self

    def artifact(self, name: str, media_type: str, description: str) -> "Description":
        """Declares an artifact the plugin writes."""
        self._artifacts.append(
            types.ArtifactSpec(name=name, media_type=media_type, description=description)
        )
        return self

    def to_wit(self) -> types.PluginInfo:
        return types.PluginInfo(
            name=self._name,
            version=self._version,
            description=self._description,
            parameters=list(self._parameters),
            capabilities=list(self._capabilities),
            artifacts=list(self._artifacts),
        )
