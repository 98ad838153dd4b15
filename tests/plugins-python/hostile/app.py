"""Test fixture: the Python twin of tests/plugins/hostile, misbehaving on request so that
tests/all/plugin_authoring.rs can check the sandbox contains a Python plugin as it does a Rust
one.

Its parameters and capabilities are those of the Rust `hostile` (tests compare them); it
implements the modes listed in `mode`'s description.
"""

import json

from factbuoy_plugin import Artifact, Capability, Description, Failed, Gatherer, Param, export
from factbuoy_plugin import host_info, output


class Hostile(Gatherer):
    def describe(self):
        return (
            Description("hostile", "0.1.0", "Misbehaves on purpose, to test the sandbox (Python).")
            .param(
                Param.string("mode")
                .required()
                .describe("well-behaved | loop | alloc | flood | panic | fail | read | host-info")
            )
            .param(Param.string("path").default("/").describe("Target of read."))
            .param(Param.integer("count").default("1").describe("How many times to repeat."))
            .param(Param.string("token").default("").secret().describe("Unused; a secret."))
            .optional_capability(Capability.HOST_INFO, "mode host-info")
            .optional_capability(Capability.read("/data"), "mode read")
            .optional_capability(Capability.read("/"), "the Rust twin's fs-… modes")
            .artifact(Artifact.facts("probe.json", "what a probe saw"))
        )

    def gather(self, params):
        mode = params.string("mode")
        path = params.string("path")
        if mode == "well-behaved":
            output.write_bytes("probe.json", "application/json", b'{"ok":true}\n')
        elif mode == "loop":
            n = 0
            while True:
                n += 1
        elif mode == "alloc":
            hoard = []
            while True:
                hoard.append(bytearray(1 << 20))
        elif mode == "flood":
            block = b"x" * (64 * 1024)
            with output.create("flood.bin", "application/octet-stream") as out:
                while True:
                    out.write(block)
        elif mode == "panic":
            raise RuntimeError("hostile plugin raised on purpose")
        elif mode == "fail":
            raise Failed("failed on purpose")
        elif mode == "read":
            try:
                with open(path) as f:
                    seen = {"read": f.read()}
            except OSError as error:
                seen = {"error": str(error)}
            output.write_json("probe.json", seen)
        elif mode == "host-info":
            output.write_json("probe.json", {"hostname": host_info.os().hostname})
        else:
            raise Failed(f"unknown mode {mode}")


Plugin = export(Hostile)
