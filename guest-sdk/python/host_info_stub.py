"""Prints ``factbuoy_plugin/host_info.pyi``, the typed declarations of ``host_info`` for editors
and type checkers, from componentize-py's bindings of ``wit/gatherer.wit``: ``host_info``
re-exports the bindings, which exist only inside a build, so an editor would otherwise know
nothing of its functions and records. tests/all/plugin_authoring_python.rs checks that the
committed stub is what this prints.

    componentize-py -d wit -w gatherer bindings BINDINGS
    python3 guest-sdk/python/host_info_stub.py BINDINGS > guest-sdk/python/factbuoy_plugin/host_info.pyi
"""

import sys
from pathlib import Path

HEADER = """\
# Typed declarations of factbuoy_plugin.host_info: componentize-py's bindings of the WIT
# interface `host-info` (wit/gatherer.wit), as stubs. Written by guest-sdk/python/host_info_stub.py;
# do not edit.
"""

bindings = Path(sys.argv[1]) / "wit_world" / "imports" / "host_info.py"
lines = bindings.read_text().splitlines(keepends=True)
# The generator's own comment lines go; the rest is declarations with bodies to replace.
body = "".join(line for line in lines if not line.startswith("# "))
sys.stdout.write(HEADER + body.replace("raise NotImplementedError", "..."))
