"""Write factbuoy gatherer plugins in Python.

A plugin is a WebAssembly component that factbuoy runs in a sandbox. With this package you
subclass one class, :class:`Gatherer`, and export it with one line; componentize-py's generated
bindings stay inside this package. Build with ``factbuoy plugin build`` (or ``componentize-py -d
wit -w gatherer componentize app -o app.wasm``) and try the result with ``factbuoy plugin run
./app.wasm``.

Example (``app.py``)::

    from factbuoy_plugin import Artifact, Capability, Description, Gatherer, Param, export
    from factbuoy_plugin import host_info, output, progress

    class Uptime(Gatherer):
        def describe(self):
            return (Description("uptime", "0.1.0", "How long this host has been up.")
                    .param(Param.boolean("pretty").default("false").describe("Indent the JSON."))
                    .capability(Capability.HOST_INFO, "reads the uptime")
                    .artifact(Artifact.facts("uptime.json", "seconds since boot")))

        def gather(self, params):
            seconds = host_info.uptime_seconds()
            progress.report(1, 1, "read the uptime")
            output.write_json("uptime.json", {"uptime_seconds": seconds},
                              pretty=params.boolean("pretty"))

    Plugin = export(Uptime)

What a plugin may touch is decided by the capabilities it asks for in ``describe`` and what the
operator grants: files only below granted ``Capability.read(path)`` paths (read them with
``open``), the :mod:`host_info` functions only with ``Capability.HOST_INFO``.
"""

from .describe import Artifact, Capability, Description, Param
from .errors import Failed, GatherError, InvalidParameters, Unavailable
from .export import Gatherer, export
from .params import Params
from . import host_info, log, output, progress

__all__ = [
    "Artifact",
    "Capability",
    "Description",
    "Failed",
    "GatherError",
    "Gatherer",
    "InvalidParameters",
    "Param",
    "Params",
    "Unavailable",
    "export",
    "host_info",
    "log",
    "output",
    "progress",
]
