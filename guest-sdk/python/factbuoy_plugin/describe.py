"""Builders for what a plugin says about itself in ``describe``."""

import warnings
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, ClassVar, List, Optional, TypeVar, Union, overload

from wit_world.imports import types

if TYPE_CHECKING:
    from typing_extensions import deprecated
else:
    _F = TypeVar("_F")

    # Marks an overload deprecated for type checkers only (typing_extensions is not bundled in
    # the component, and warnings.deprecated needs Python 3.13): at run time the deprecated form
    # warns itself, with warnings.warn.
    def deprecated(_message: str) -> Callable[[_F], _F]:
        return lambda function: function

# What the deprecated three-argument form of Description.artifact says (type checkers read
# the decorator's literal, so it is written out there too).
_ARTIFACT_FORM = (
    "Description.artifact(name, media_type, description) is deprecated since 0.2: declare the "
    "artifact's kind with artifact(Artifact.facts(name, description)), .table, .log or .opaque"
)


@dataclass(frozen=True)
class Capability:
    """Something beyond pure computation that a plugin asks for."""

    read_path: Optional[str] = None
    # Declared here so that type checkers know it; set below, once the class exists.
    HOST_INFO: ClassVar["Capability"]

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
Capability.HOST_INFO = Capability()


class Artifact:
    """An artifact a plugin writes; start with the constructor for its kind."""

    def __init__(self, name: str, media_type: str, description: str, kind: types.ArtifactKind):
        self._spec = types.ArtifactSpec(
            name=name, media_type=media_type, description=description, kind=kind
        )

    @classmethod
    def facts(cls, name: str, description: str) -> "Artifact":
        """One JSON document about the node, an object at its top (``application/json``):
        ``inspect facts``, ``query``, ``diff`` and ``sql`` read it. Name the keys of its lists
        with ``list_keys``."""
        return cls(name, "application/json", description, types.ArtifactKind_Facts([]))

    @classmethod
    def table(cls, name: str, description: str) -> "Artifact":
        """JSON Lines (``application/jsonl``): one JSON object per line, one row per item;
        ``inspect sql`` makes it a table named ``<plugin>_<artifact>``. Name the columns that
        identify a row with ``row_keys``."""
        return cls(name, "application/jsonl", description, types.ArtifactKind_Table([]))

    @classmethod
    def log(cls, name: str, description: str) -> "Artifact":
        """Time-ordered entries, one JSON object per line with the journal's field names
        (``__REALTIME_TIMESTAMP``, ``MESSAGE``, ``PRIORITY``), as ``journalctl -o json``
        writes them."""
        return cls(name, "application/jsonl", description, types.ArtifactKind_Log())

    @classmethod
    def opaque(cls, name: str, media_type: str, description: str) -> "Artifact":
        """Anything else, of media type ``media_type``: kept in the bundle, not interpreted."""
        return cls(name, media_type, description, types.ArtifactKind_Opaque())

    def list_keys(self, path: str, *keys: str) -> "Artifact":
        """Says the items of the list at ``path`` (field names from the document's top, joined
        by ``.``: ``mounts``, or ``interfaces.addresses`` for the lists inside each interface)
        are told apart by the fields ``keys``, so a diff shows an item added, removed or changed
        instead of every later position changing. For facts documents."""
        if isinstance(self._spec.kind, types.ArtifactKind_Facts):
            self._spec.kind.value.append(types.ListKeys(path=path, keys=list(keys)))
        return self

    def row_keys(self, *keys: str) -> "Artifact":
        """Says the columns ``keys`` identify a row. For tables."""
        if isinstance(self._spec.kind, types.ArtifactKind_Table):
            self._spec.kind.value[:] = list(keys)
        return self

    def media_type(self, media_type: str) -> "Artifact":
        """Overrides the media type its kind gives it."""
        self._spec.media_type = media_type
        return self


def _kind_of(media_type: str) -> types.ArtifactKind:
    """The kind an artifact of ``media_type`` declared without one has: what the host's
    ``ArtifactKind::from_media_type`` (protocol/src/artifacts.rs) gives a 0.1 plugin's."""
    essence = media_type.split(";")[0].strip().lower()
    json_lines = ("application/jsonl", "application/x-ndjson", "application/x-jsonlines",
                  "application/jsonlines")
    if essence in json_lines:
        return types.ArtifactKind_Table([])
    if essence == "application/json" or (
        essence.startswith("application/") and essence.endswith("+json")
    ):
        return types.ArtifactKind_Facts([])
    return types.ArtifactKind_Opaque()


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

    @overload
    def artifact(self, artifact: Artifact) -> "Description": ...

    @overload
    @deprecated(
        "Description.artifact(name, media_type, description) is deprecated since 0.2: declare "
        "the artifact's kind with artifact(Artifact.facts(name, description)), .table, .log or "
        ".opaque"
    )
    def artifact(self, name: str, /, media_type: str, description: str) -> "Description": ...

    def artifact(
        self,
        artifact: Union[Artifact, str],
        media_type: Optional[str] = None,
        description: Optional[str] = None,
    ) -> "Description":
        """Declares an artifact the plugin writes and what kind of data it holds, which tells
        ``factbuoy inspect`` how to read it.

        Deprecated since 0.2, kept for plugins written for 0.1: ``artifact(name, media_type,
        description)``, whose artifact gets the kind its media type implies (JSON: facts, JSON
        Lines: a table, anything else: opaque), as the host gives a 0.1 plugin's."""
        if isinstance(artifact, str) and media_type is not None and description is not None:
            warnings.warn(_ARTIFACT_FORM, DeprecationWarning, stacklevel=2)
            artifact = Artifact(artifact, media_type, description, _kind_of(media_type))
        if not isinstance(artifact, Artifact):
            raise TypeError(
                "artifact takes an Artifact: Artifact.facts(name, description), .table, .log or .opaque"
            )
        self._artifacts.append(artifact._spec)
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
