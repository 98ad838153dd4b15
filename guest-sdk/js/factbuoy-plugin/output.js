// Writing artifacts: named files streamed to the host chunk by chunk.

import { Failed } from "./errors.js";
import { output as host } from "./host.js";

/** Largest chunk handed to the host in one call. The host refuses chunks above its own per-call
 * limit (1 MiB by default); staying well below it keeps each call cheap. */
export const CHUNK_BYTES = 64 * 1024;

const encoder = new TextEncoder();

/** What the host's `output-error` says, in words.
 * @param {any} error */
function message(error) {
  switch (error?.tag) {
    case "invalid-name":
      return `invalid artifact name: ${error.val}`;
    case "limit-exceeded":
      return `limit exceeded: ${error.val}`;
    case "io":
      return `host could not store output: ${error.val}`;
    case "closed":
      return "artifact already finished";
    default:
      return String(error);
  }
}

/** The host's refusal (thrown with the `output-error` as its `payload`) as `Failed`.
 * @template T @param {() => T} call @returns {T} */
function hostCall(call) {
  try {
    return call();
  } catch (error) {
    if (error instanceof Object && "payload" in error) throw new Failed(`writing output: ${message(error.payload)}`);
    throw error;
  }
}

/** One artifact being written. Call `close` to finish it and learn about errors. */
export class Artifact {
  /** @param {string} name @param {string} mediaType */
  constructor(name, mediaType) {
    this.inner = hostCall(() => host.create(name, mediaType));
    this.buffer = new Uint8Array(CHUNK_BYTES);
    this.length = 0;
  }
  /** Appends a Uint8Array, or a string encoded as UTF-8; sent in chunks of `CHUNK_BYTES`.
   * @param {Uint8Array | string} data */
  write(data) {
    let bytes = typeof data === "string" ? encoder.encode(data) : data;
    while (bytes.length > 0) {
      const taken = Math.min(bytes.length, CHUNK_BYTES - this.length);
      this.buffer.set(bytes.subarray(0, taken), this.length);
      this.length += taken;
      bytes = bytes.subarray(taken);
      if (this.length === CHUNK_BYTES) this.flush();
    }
  }
  /** Sends what is buffered and marks the artifact complete. */
  close() {
    this.flush();
    hostCall(() => this.inner.finish());
  }
  flush() {
    if (this.length > 0) {
      const chunk = this.buffer.slice(0, this.length);
      hostCall(() => this.inner.write(chunk));
      this.length = 0;
    }
  }
}

/** Starts an artifact named `name` (a relative path such as `facts.json` or `logs/kern.json`).
 * @param {string} name @param {string} mediaType */
export function create(name, mediaType) {
  return new Artifact(name, mediaType);
}

/** Writes one whole artifact of bytes (a Uint8Array).
 * @param {string} name @param {string} mediaType @param {Uint8Array} data */
export function writeBytes(name, mediaType, data) {
  const artifact = create(name, mediaType);
  artifact.write(data);
  artifact.close();
}

/** Writes one whole text artifact, UTF-8.
 * @param {string} name @param {string} text @param {string} [mediaType] */
export function writeText(name, text, mediaType = "text/plain; charset=utf-8") {
  writeBytes(name, mediaType, encoder.encode(text));
}

/** JSON.stringify's replacer that writes BigInts as numbers.
 * @param {string} _key @param {unknown} value */
function bigintAsNumber(_key, value) {
  return typeof value === "bigint" ? Number(value) : value;
}

/** Writes `value` as one JSON artifact ending in a newline, compact unless `pretty`. BigInts
 * (the 64-bit numbers of `hostInfo`) are written as numbers.
 * @param {string} name @param {unknown} value @param {{ pretty?: boolean }} [options] */
export function writeJson(name, value, { pretty = false } = {}) {
  const text = JSON.stringify(value, bigintAsNumber, pretty ? 2 : undefined);
  writeText(name, text + "\n", "application/json");
}

/** Writes `rows` as a JSON Lines artifact (`application/jsonl`, a table: declare it with
 * `Artifact.table`), one compact JSON value per line. BigInts are written as numbers.
 * @param {string} name @param {Iterable<unknown>} rows */
export function writeJsonLines(name, rows) {
  const artifact = create(name, "application/jsonl");
  for (const row of rows) {
    artifact.write(encoder.encode(JSON.stringify(row, bigintAsNumber) + "\n"));
  }
  artifact.close();
}
