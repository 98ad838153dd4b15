// Reading files below the paths the plugin was granted (`Capability.read(path)`). The host
// maps each granted path read-only; anything else is not there.

import { preopens } from "./host.js";

/** @typedef {import("./host.js").preopens.Descriptor} Descriptor */

const decoder = new TextDecoder();
/** Bytes asked of the host per read call. */
const READ_BYTES = 64n * 1024n;

/** A file system operation that failed; `code` is WASI's error code (`no-entry`, `access`,
 * `not-directory`, ...) or `not-granted` when no granted path covers the path. */
export class FsError extends Error {
  /** @param {string} path @param {string} code */
  constructor(path, code) {
    super(`${path}: ${code === "not-granted" ? "not below any granted read path" : code}`);
    this.name = "FsError";
    this.path = path;
    this.code = code;
  }
}

/** The granted directory holding `path` (the longest granted prefix) and the rest of the path.
 * @param {string} path
 * @returns {{ descriptor: Descriptor, rest: string }} */
function resolve(path) {
  if (!path.startsWith("/")) throw new FsError(path, "not-granted");
  /** @type {{ descriptor: Descriptor, root: string } | undefined} */
  let best;
  for (const [descriptor, root] of preopens.getDirectories()) {
    const prefix = root.endsWith("/") ? root : root + "/";
    const inside = path === root || path.startsWith(prefix);
    if (inside && (!best || root.length > best.root.length)) best = { descriptor, root };
  }
  if (!best) throw new FsError(path, "not-granted");
  const rest = path.slice(best.root.length).replace(/^\/+/, "");
  return { descriptor: best.descriptor, rest: rest === "" ? "." : rest };
}

/** What `call` returns; WASI's refusal (thrown with its error code as `payload`) as `FsError`.
 * @template T @param {string} path @param {() => T} call @returns {T} */
function wasi(path, call) {
  try {
    return call();
  } catch (error) {
    if (error instanceof Object && "payload" in error) throw new FsError(path, String(error.payload));
    throw error;
  }
}

/** @param {string} path @param {{ directory?: boolean }} flags */
function open(path, flags) {
  const { descriptor, rest } = resolve(path);
  return wasi(path, () => descriptor.openAt({ symlinkFollow: true }, rest, flags, { read: true }));
}

/** The whole content of the file at `path` (absolute), as a Uint8Array.
 * @param {string} path */
export function readBytes(path) {
  const file = open(path, {});
  /** @type {Uint8Array[]} */
  const chunks = [];
  let offset = 0n;
  let total = 0;
  for (;;) {
    const [chunk, end] = wasi(path, () => file.read(READ_BYTES, offset));
    if (chunk.length > 0) chunks.push(chunk);
    total += chunk.length;
    offset += BigInt(chunk.length);
    if (end || chunk.length === 0) break;
  }
  const bytes = new Uint8Array(total);
  let at = 0;
  for (const chunk of chunks) {
    bytes.set(chunk, at);
    at += chunk.length;
  }
  return bytes;
}

/** The whole content of the file at `path` (absolute), decoded as UTF-8.
 * @param {string} path */
export function readText(path) {
  return decoder.decode(readBytes(path));
}

/** The names in the directory at `path` (absolute), sorted.
 * @param {string} path */
export function readDir(path) {
  const dir = open(path, { directory: true });
  const entries = wasi(path, () => dir.readDirectory());
  /** @type {string[]} */
  const names = [];
  for (;;) {
    const entry = wasi(path, () => entries.readDirectoryEntry());
    if (entry === undefined) break;
    names.push(entry.name);
  }
  return names.sort();
}
