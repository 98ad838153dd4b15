// Unit tests of the SDK in Node against stand-ins of the host's interfaces (stub-host.js). Run by
// tests/all/plugin_authoring_js.rs, or here: `node --import ./tests/register.js --test tests/`.
import assert from "node:assert/strict";
import { beforeEach, test } from "node:test";

import {
  Artifact,
  Capability,
  Description,
  Failed,
  InvalidParameters,
  Param,
  Params,
  Unavailable,
  exportGatherer,
  fs,
  log,
  output,
  progress,
} from "../factbuoy-plugin/index.js";

const host = globalThis.stubHost;

beforeEach(() => {
  Object.assign(host, { artifacts: {}, logs: [], reports: [], files: {}, failWrite: undefined });
});

function content(name) {
  const artifact = host.artifacts[name];
  return new TextDecoder().decode(Buffer.concat(artifact.chunks.map((c) => Buffer.from(c))));
}

test("JSON is streamed in chunks below the per-call limit, then finished", () => {
  const value = { items: Array(200).fill("x".repeat(1000)), big: 2n ** 40n };
  output.writeJson("facts.json", value);
  const artifact = host.artifacts["facts.json"];
  assert.equal(artifact.mediaType, "application/json");
  assert.ok(artifact.finished, "not finished");
  assert.ok(artifact.chunks.length > 3);
  assert.ok(artifact.chunks.every((c) => c.length <= output.CHUNK_BYTES));
  assert.ok(content("facts.json").endsWith("}\n"));
  assert.deepEqual(JSON.parse(content("facts.json")), { ...value, big: 2 ** 40 });
});

test("text and bytes artifacts", () => {
  output.writeText("a.txt", "héllo");
  output.writeBytes("b.bin", "application/octet-stream", new Uint8Array([0, 1, 2]));
  assert.equal(content("a.txt"), "héllo");
  assert.equal(host.artifacts["a.txt"].mediaType, "text/plain; charset=utf-8");
  assert.deepEqual([...host.artifacts["b.bin"].chunks[0]], [0, 1, 2]);
});

test("a host refusal becomes Failed with its reason", () => {
  host.failWrite = { tag: "limit-exceeded", val: "total output above 4 GiB" };
  assert.throws(() => output.writeText("a.txt", "x"), {
    name: "Failed",
    message: "writing output: limit exceeded: total output above 4 GiB",
  });
  assert.throws(() => output.create("../x", "text/plain"), { message: "writing output: invalid artifact name: ../x" });
});

test("the builders make the contract's description", () => {
  const plugin = exportGatherer({
    describe: () =>
      new Description("demo", "1.2.3", "A demo.")
        .param(Param.duration("since").required().describe("How far back."))
        .param(Param.string("token").default("").secret())
        .capability(Capability.HOST_INFO, "why")
        .optionalCapability(Capability.read("/proc"), "why not")
        .artifact(Artifact.facts("a.json", "an artifact").listKeys("mounts", ["mount"]))
        .artifact(Artifact.table("rows.jsonl", "rows").rowKeys(["name"]))
        .artifact(Artifact.log("log.jsonl", "entries"))
        .artifact(Artifact.opaque("raw.bin", "application/octet-stream", "bytes").mediaType("x/y")),
    gather() {},
  });
  const info = plugin.describe();
  assert.equal(info.name, "demo");
  const [since, token] = info.parameters;
  assert.deepEqual([since.type, since.required, since.default], ["duration", true, undefined]);
  assert.deepEqual([token.default, token.secret], ["", true]);
  assert.deepEqual(info.capabilities[0], { capability: { tag: "host-info" }, required: true, reason: "why" });
  assert.deepEqual(info.capabilities[1].capability, { tag: "read-path", val: "/proc" });
  assert.deepEqual(info.artifacts, [
    {
      name: "a.json",
      mediaType: "application/json",
      description: "an artifact",
      kind: { tag: "facts", val: [{ path: "mounts", keys: ["mount"] }] },
    },
    { name: "rows.jsonl", mediaType: "application/jsonl", description: "rows", kind: { tag: "table", val: ["name"] } },
    { name: "log.jsonl", mediaType: "application/jsonl", description: "entries", kind: { tag: "log" } },
    { name: "raw.bin", mediaType: "x/y", description: "bytes", kind: { tag: "opaque" } },
  ]);
  assert.throws(() => new Description("d", "1", "").artifact("a.json"), { name: "TypeError" });
});

test("the deprecated three-argument artifact gets the kind its media type implies", () => {
  const cases = [
    ["a.json", "application/json", { tag: "facts", val: [] }],
    ["b.json", "application/vnd.x+json; charset=utf-8", { tag: "facts", val: [] }],
    ["c.jsonl", "application/jsonl", { tag: "table", val: [] }],
    ["d.ndjson", "application/x-ndjson", { tag: "table", val: [] }],
    ["e.txt", "text/plain", { tag: "opaque" }],
  ];
  const description = new Description("old", "0.1.0", "Written for 0.1.");
  for (const [name, mediaType] of cases) description.artifact(name, mediaType, "an artifact");
  assert.deepEqual(
    description.info.artifacts,
    cases.map(([name, mediaType, kind]) => ({ name, mediaType, description: "an artifact", kind })),
  );
});

test("typed access names the parameter on a mismatch", () => {
  const params = new Params([
    ["name", { tag: "string", val: "web-1" }],
    ["count", { tag: "integer", val: 3n }],
    ["huge", { tag: "integer", val: 2n ** 60n }],
    ["since", { tag: "duration", val: 90000n }],
    ["units", { tag: "string-list", val: ["a", "b"] }],
  ]);
  assert.equal(params.string("name"), "web-1");
  assert.equal(params.integer("count"), 3);
  assert.equal(params.bigint("huge"), 2n ** 60n);
  assert.equal(params.durationMs("since"), 90000);
  assert.deepEqual(params.stringList("units"), ["a", "b"]);
  assert.deepEqual(params.stringList("absent"), []);
  assert.equal(params.optBoolean("absent"), undefined);
  assert.throws(() => params.integer("name"), { name: "InvalidParameters", message: /`name` is not of type integer/ });
  assert.throws(() => params.boolean("verbose"), { name: "InvalidParameters", message: /`verbose` has no value/ });
  assert.throws(() => params.integer("huge"), { message: /`huge` is 1152921504606846976, too large/ });
});

test("errors become the contract's variants; other exceptions fail with name, message and a logged stack", () => {
  const plugin = exportGatherer({
    describe: () => new Description("picky", "0.1.0", "Refuses."),
    gather(params) {
      const why = params.string("why");
      if (why === "bad") throw new InvalidParameters("no");
      if (why === "gone") throw new Unavailable("none here");
      if (why === "fail") throw new Failed("broke");
      null.property;
    },
  });
  const gather = (why) => {
    try {
      plugin.gather([["why", { tag: "string", val: why }]]);
    } catch (error) {
      return error;
    }
  };
  assert.deepEqual(gather("bad"), { tag: "invalid-parameters", val: "no" });
  assert.deepEqual(gather("gone"), { tag: "unavailable", val: "none here" });
  assert.deepEqual(gather("fail"), { tag: "failed", val: "broke" });
  const bug = gather("bug");
  assert.equal(bug.tag, "failed");
  assert.match(bug.val, /^TypeError: .*null/);
  const [level, logged] = host.logs.at(-1);
  assert.equal(level, "error");
  assert.match(logged, /at gather .*sdk\.test\.js/);
});

test("only an object with describe and gather can be exported", () => {
  assert.throws(() => exportGatherer({ describe() {} }), TypeError);
});

test("progress and log reach the host, counters as u64", () => {
  progress.report(1, 3, "one of three");
  progress.warn("could not read x");
  log.info("hello");
  assert.deepEqual(host.reports[0], { completed: 1n, total: 3n, message: "one of three", warnings: [], errors: [] });
  assert.deepEqual(host.reports[1].warnings, ["could not read x"]);
  assert.deepEqual(host.logs, [["info", "hello"]]);
});

test("fs reads below the longest granted path and names what is missing", () => {
  host.files = { "/": {}, "/proc": { "self/mounts": "proc /proc proc rw 0 0\n".repeat(5000), "net/tcp": "x" } };
  assert.equal(fs.readText("/proc/self/mounts").length, 23 * 5000);
  assert.deepEqual(fs.readDir("/proc/net"), ["tcp"]);
  assert.throws(() => fs.readText("/proc/nothing"), { name: "FsError", code: "no-entry", message: "/proc/nothing: no-entry" });
  host.files = {};
  assert.throws(() => fs.readText("/etc/hostname"), { code: "not-granted" });
});
