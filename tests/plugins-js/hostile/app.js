// Test fixture: the JavaScript twin of tests/plugins/hostile, misbehaving on request so that
// tests/all/plugin_authoring.rs can check the sandbox contains a JavaScript plugin as it does a
// Rust one. Its parameters and capabilities are those of the Rust `hostile` (tests compare
// them); it implements the modes listed in `mode`'s description.

import {
  Artifact,
  Capability,
  Description,
  Failed,
  Param,
  exportGatherer,
  fs,
  hostInfo,
  output,
} from "./factbuoy-plugin/index.js";

export const plugin = exportGatherer({
  describe() {
    return new Description("hostile", "0.1.0", "Misbehaves on purpose, to test the sandbox (JavaScript).")
      .param(Param.string("mode").required().describe("well-behaved | loop | alloc | flood | panic | fail | read | host-info"))
      .param(Param.string("path").default("/").describe("Target of read."))
      .param(Param.integer("count").default("1").describe("How many times to repeat."))
      .param(Param.string("token").default("").secret().describe("Unused; a secret."))
      .optionalCapability(Capability.HOST_INFO, "mode host-info")
      .optionalCapability(Capability.read("/data"), "mode read")
      .optionalCapability(Capability.read("/"), "the Rust twin's fs-… modes")
      .artifact(Artifact.facts("probe.json", "what a probe saw"));
  },

  gather(params) {
    const mode = params.string("mode");
    const path = params.string("path");
    switch (mode) {
      case "well-behaved":
        output.writeJson("probe.json", { ok: true });
        break;
      case "loop": {
        let n = 0;
        for (;;) n++;
      }
      case "alloc": {
        const hoard = [];
        for (;;) hoard.push(new Uint8Array(1 << 20).fill(1));
      }
      case "flood": {
        const out = output.create("flood.bin", "application/octet-stream");
        const block = new Uint8Array(64 * 1024).fill(120);
        for (;;) out.write(block);
      }
      case "panic":
        throw new Error("hostile plugin threw on purpose");
      case "fail":
        throw new Failed("failed on purpose");
      case "read": {
        let seen;
        try {
          seen = { read: fs.readText(path) };
        } catch (error) {
          seen = { error: error.message };
        }
        output.writeJson("probe.json", seen);
        break;
      }
      case "host-info":
        output.writeJson("probe.json", { hostname: hostInfo.os().hostname });
        break;
      default:
        throw new Failed(`unknown mode ${mode}`);
    }
  },
});
