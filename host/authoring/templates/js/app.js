// `{{name}}`: a factbuoy gatherer plugin in JavaScript.
//
// Build it with `factbuoy plugin build`, run it with
// `factbuoy plugin run target/{{name}}.wasm --grant {{name}}:host-info`.

import { Artifact, Capability, Description, Param, exportGatherer, hostInfo, output, progress } from "./factbuoy-plugin/index.js";

// componentize-js finds the plugin's entry points by this name.
export const plugin = exportGatherer({
  // What the plugin is; must not touch the host (it is called to list and plan runs).
  describe() {
    return new Description("{{name}}", "0.1.0", "Greets the host it runs on.")
      .param(Param.string("greeting").default("hello").describe("What to say to the host."))
      .capability(Capability.HOST_INFO, "reads the host name and kernel version")
      .artifact(Artifact.facts("greeting.json", "the greeting and who received it"));
  },

  // Gathers facts and writes them as artifacts; params were checked against describe.
  gather(params) {
    const os = hostInfo.os();
    progress.report(1, 1, "greeted the host");
    output.writeJson("greeting.json", {
      greeting: params.string("greeting"),
      hostname: os.hostname,
      kernel: os.kernelVersion,
    });
  },
});
