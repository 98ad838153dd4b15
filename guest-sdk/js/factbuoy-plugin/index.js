// Write factbuoy gatherer plugins in JavaScript.
//
// A plugin is a WebAssembly component that factbuoy runs in a sandbox. With this package you
// write one object with `describe` and `gather` and export it with one line; the contract's
// imports stay inside this package. Build with `factbuoy plugin build` (componentize-js
// underneath) and try the result with `factbuoy plugin run ./target/NAME.wasm`.
//
//     import { Artifact, Capability, Description, Param, exportGatherer, hostInfo, output } from "./factbuoy-plugin/index.js";
//
//     export const plugin = exportGatherer({
//       describe() {
//         return new Description("uptime", "0.1.0", "How long this host has been up.")
//           .param(Param.boolean("pretty").default("false").describe("Indent the JSON."))
//           .capability(Capability.HOST_INFO, "reads the uptime")
//           .artifact(Artifact.facts("uptime.json", "seconds since boot"));
//       },
//       gather(params) {
//         output.writeJson("uptime.json", { uptime_seconds: hostInfo.uptimeSeconds() },
//                          { pretty: params.boolean("pretty") });
//       },
//     });
//
// What a plugin may touch is decided by the capabilities it asks for in `describe` and what the
// operator grants: files only below granted `Capability.read(path)` paths (read them with `fs`),
// the `hostInfo` functions only with `Capability.HOST_INFO`. The API is in docs/plugins-js.md.

import { Description } from "./describe.js";
import { GatherError } from "./errors.js";
import { hostInfo as host, logging, progress as hostProgress } from "./host.js";
import { Params } from "./params.js";

export { Artifact, Capability, Description, Param } from "./describe.js";
export { Failed, GatherError, InvalidParameters, Unavailable } from "./errors.js";
export { Params } from "./params.js";
export * as output from "./output.js";
export * as fs from "./fs.js";

/** Facts the host gathers (needs `Capability.HOST_INFO`): `os()`, `cpus()`, `memory()`,
 * `disks()`, `networkInterfaces()`, `uptimeSeconds()` and the rest of the contract's
 * `host-info` interface, in camelCase; 64-bit numbers are BigInts. */
export const hostInfo = host;

/** Log records, shown by the host with the plugin's name attached.
 * @type {typeof import("./index.js").log} */
export const log = {
  trace: (message) => logging.log("trace", String(message)),
  debug: (message) => logging.log("debug", String(message)),
  info: (message) => logging.log("info", String(message)),
  warn: (message) => logging.log("warn", String(message)),
  error: (message) => logging.log("error", String(message)),
};

/** @param {number | bigint} completed @param {number | bigint} total @param {string} message
 * @param {string[]} warnings @param {string[]} errors */
function report(completed, total, message, warnings, errors) {
  hostProgress.report({ completed: BigInt(completed), total: BigInt(total), message, warnings, errors });
}

/** Progress reports: shown by `factbuoy plugin run` and relayed to a run's status.
 * @type {typeof import("./index.js").progress} */
export const progress = {
  /** `completed` of `total` units are done (`total` 0 when unknown). */
  report: (completed, total, message) => report(completed, total, String(message), [], []),
  /** A problem that did not stop the plugin, for example a file it could not read. */
  warn: (message) => report(0, 0, "", [String(message)], []),
  /** A problem that means part of the output is missing. */
  error: (message) => report(0, 0, "", [], [String(message)]),
};

/** Makes the contract's `plugin` export from a gatherer: an object (or class instance) with
 * `describe()`, returning a `Description`, and `gather(params)`, writing artifacts with `output`
 * and throwing a `GatherError` subclass to fail with a message. Assign the result to `plugin`:
 * `export const plugin = exportGatherer({...})` (componentize-js looks the export up by name).
 * @param {import("./index.js").Gatherer} gatherer
 * @returns {import("./index.js").PluginExport} */
export function exportGatherer(gatherer) {
  if (typeof gatherer?.describe !== "function" || typeof gatherer?.gather !== "function") {
    throw new TypeError("exportGatherer takes an object with describe() and gather(params)");
  }
  return {
    describe() {
      const description = gatherer.describe();
      if (!(description instanceof Description)) {
        throw new TypeError("describe() must return a Description");
      }
      return description.info;
    },
    /** @param {Array<[string, import("./params.js").ParamValue]>} values */
    gather(values) {
      try {
        gatherer.gather(new Params(values));
      } catch (error) {
        throw asGatherError(error);
      }
    },
  };
}

/** The contract's `gather-error` for what `gather` threw. Anything but a `GatherError` is a bug,
 * like a Rust panic: the run fails with its name and message, the stack goes to the log.
 * @param {unknown} error
 * @returns {{ tag: string, val: string }} */
function asGatherError(error) {
  if (error instanceof GatherError) return { tag: error.tag, val: error.message };
  const text = error instanceof Error ? `${error.name}: ${error.message}` : `thrown: ${String(error)}`;
  log.error(error instanceof Error && error.stack ? `${text}\n${error.stack}` : text);
  return { tag: "failed", val: text };
}
