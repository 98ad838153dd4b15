// factbuoy's development runner for a JavaScript plugin project, written by `factbuoy plugin
// run` into the project's target/dev/ (not yours to edit).
//
// componentize-js builds this module, with the contract's interfaces the project uses, instead
// of the project's app.js: the engine is compiled once. Each call reads the project's code,
// bundled into one CommonJS file by `plugin run`, from the folder the runtime maps read-only at
// /factbuoy-sources, so an edit needs no new component: it runs at once.

import { getDirectories } from "wasi:filesystem/preopens@WASI_VERSION";
// factbuoy: imports

/** The interfaces the bundle may `require`, by name. */
const INTERFACES = {
  // factbuoy: interfaces
};

const SOURCES = "/factbuoy-sources";
const BUNDLE = "target/dev/js/app.cjs";
const READ_BYTES = 1024n * 1024n;

/** The project's bundle, as `plugin run` wrote it before this run. */
function readBundle() {
  const found = getDirectories().find(([, path]) => path === SOURCES);
  if (!found) throw new Error(`${SOURCES} is not mapped: run this with \`factbuoy plugin run DIR\``);
  const file = found[0].openAt({ symlinkFollow: false }, BUNDLE, {}, { read: true });
  const chunks = [];
  let offset = 0n;
  for (;;) {
    const [bytes, end] = file.read(READ_BYTES, offset);
    chunks.push(bytes);
    offset += BigInt(bytes.length);
    if (end || bytes.length === 0) break;
  }
  const all = new Uint8Array(chunks.reduce((n, c) => n + c.length, 0));
  let at = 0;
  for (const chunk of chunks) {
    all.set(chunk, at);
    at += chunk.length;
  }
  return new TextDecoder().decode(all);
}

/** The project's `plugin`, from its code as it is now: every call runs in a fresh instance. */
function projectPlugin() {
  const module = { exports: {} };
  const require = (name) => {
    if (Object.hasOwn(INTERFACES, name)) return INTERFACES[name];
    throw new Error(`${name} cannot be imported: it is not an interface of the contract`);
  };
  // Stacks then name the bundle's file, which the author can open at the line they give.
  const code = `${readBundle()}\n//# sourceURL=${BUNDLE}`;
  new Function("require", "module", "exports", code)(require, module, module.exports);
  if (!module.exports.plugin) {
    throw new Error("app.js exports no plugin: `export const plugin = exportGatherer({...})`");
  }
  return module.exports.plugin;
}

export const plugin = {
  describe() {
    return projectPlugin().describe();
  },
  gather(params) {
    return projectPlugin().gather(params);
  },
};
