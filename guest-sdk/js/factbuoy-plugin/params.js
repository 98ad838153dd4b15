// Typed access to the parameters `gather` receives.

import { InvalidParameters } from "./errors.js";

/** The parameters of one `gather` call. The host has already checked them against `describe`,
 * so a type mismatch here means the plugin asked for a parameter under the wrong type: the
 * accessors throw `InvalidParameters` naming the parameter. */
export class Params {
  /** `values`: the contract's list of `[name, {tag, val}]`. */
  constructor(values) {
    this.values = new Map(values);
  }
  /** Whether the parameter has a value (given or defaulted). */
  has(name) {
    return this.values.has(name);
  }
  /** A text parameter that has a value (required, or with a default). */
  string(name) {
    return required(name, this.optString(name));
  }
  /** A text parameter that may be absent (`undefined`). */
  optString(name) {
    return this.typed(name, "string");
  }
  /** An integer parameter that has a value, as a Number; beyond 2^53 use `bigint`. */
  integer(name) {
    return required(name, this.optInteger(name));
  }
  /** An integer parameter that may be absent, as a Number. */
  optInteger(name) {
    const value = this.optBigint(name);
    if (value === undefined) return undefined;
    if (value > BigInt(Number.MAX_SAFE_INTEGER) || value < BigInt(Number.MIN_SAFE_INTEGER)) {
      throw new InvalidParameters(`parameter \`${name}\` is ${value}, too large for a Number; read it with params.bigint`);
    }
    return Number(value);
  }
  /** An integer parameter that may be absent, as a BigInt. */
  optBigint(name) {
    const value = this.typed(name, "integer");
    return value === undefined ? undefined : BigInt(value);
  }
  /** An integer parameter that has a value, as a BigInt. */
  bigint(name) {
    return required(name, this.optBigint(name));
  }
  /** A float parameter that has a value. */
  float(name) {
    return required(name, this.optFloat(name));
  }
  /** A float parameter that may be absent. */
  optFloat(name) {
    return this.typed(name, "float");
  }
  /** A boolean parameter that has a value. */
  boolean(name) {
    return required(name, this.optBoolean(name));
  }
  /** A boolean parameter that may be absent. */
  optBoolean(name) {
    return this.typed(name, "boolean");
  }
  /** A duration parameter that has a value, in milliseconds. */
  durationMs(name) {
    return required(name, this.optDurationMs(name));
  }
  /** A duration parameter that may be absent, in milliseconds. */
  optDurationMs(name) {
    const ms = this.typed(name, "duration");
    return ms === undefined ? undefined : Number(ms);
  }
  /** A list parameter; empty when absent. */
  stringList(name) {
    return [...(this.typed(name, "string-list") ?? [])];
  }
  typed(name, type) {
    const value = this.values.get(name);
    if (value === undefined) return undefined;
    if (value.tag !== type) {
      throw new InvalidParameters(
        `parameter \`${name}\` is not of type ${type} (it is ${value.tag}); the plugin's describe and gather disagree`,
      );
    }
    return value.val;
  }
}

function required(name, value) {
  if (value === undefined) {
    throw new InvalidParameters(`parameter \`${name}\` has no value; declare it required or give it a default`);
  }
  return value;
}
