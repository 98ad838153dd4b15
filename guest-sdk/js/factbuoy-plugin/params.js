// Typed access to the parameters `gather` receives.

import { InvalidParameters } from "./errors.js";

/** The JavaScript value of each parameter type, as the contract hands it over.
 * @typedef {{ string: string, integer: bigint, float: number, boolean: boolean,
 *   duration: bigint, "string-list": string[] }} ParamTypes */
/** A parameter's value: its type's tag and the value.
 * @typedef {{ [T in keyof ParamTypes]: { tag: T, val: ParamTypes[T] } }[keyof ParamTypes]} ParamValue */

/** The parameters of one `gather` call. The host has already checked them against `describe`,
 * so a type mismatch here means the plugin asked for a parameter under the wrong type: the
 * accessors throw `InvalidParameters` naming the parameter. */
export class Params {
  /** `values`: the contract's list of `[name, {tag, val}]`.
   * @param {Iterable<[string, ParamValue]>} values */
  constructor(values) {
    this.values = new Map(values);
  }
  /** Whether the parameter has a value (given or defaulted).
   * @param {string} name */
  has(name) {
    return this.values.has(name);
  }
  /** A text parameter that has a value (required, or with a default).
   * @param {string} name */
  string(name) {
    return required(name, this.optString(name));
  }
  /** A text parameter that may be absent (`undefined`).
   * @param {string} name */
  optString(name) {
    return this.typed(name, "string");
  }
  /** An integer parameter that has a value, as a Number; beyond 2^53 use `bigint`.
   * @param {string} name */
  integer(name) {
    return required(name, this.optInteger(name));
  }
  /** An integer parameter that may be absent, as a Number.
   * @param {string} name */
  optInteger(name) {
    const value = this.optBigint(name);
    if (value === undefined) return undefined;
    if (value > BigInt(Number.MAX_SAFE_INTEGER) || value < BigInt(Number.MIN_SAFE_INTEGER)) {
      throw new InvalidParameters(`parameter \`${name}\` is ${value}, too large for a Number; read it with params.bigint`);
    }
    return Number(value);
  }
  /** An integer parameter that may be absent, as a BigInt.
   * @param {string} name */
  optBigint(name) {
    const value = this.typed(name, "integer");
    return value === undefined ? undefined : BigInt(value);
  }
  /** An integer parameter that has a value, as a BigInt.
   * @param {string} name */
  bigint(name) {
    return required(name, this.optBigint(name));
  }
  /** A float parameter that has a value.
   * @param {string} name */
  float(name) {
    return required(name, this.optFloat(name));
  }
  /** A float parameter that may be absent.
   * @param {string} name */
  optFloat(name) {
    return this.typed(name, "float");
  }
  /** A boolean parameter that has a value.
   * @param {string} name */
  boolean(name) {
    return required(name, this.optBoolean(name));
  }
  /** A boolean parameter that may be absent.
   * @param {string} name */
  optBoolean(name) {
    return this.typed(name, "boolean");
  }
  /** A duration parameter that has a value, in milliseconds.
   * @param {string} name */
  durationMs(name) {
    return required(name, this.optDurationMs(name));
  }
  /** A duration parameter that may be absent, in milliseconds.
   * @param {string} name */
  optDurationMs(name) {
    const ms = this.typed(name, "duration");
    return ms === undefined ? undefined : Number(ms);
  }
  /** A list parameter; empty when absent.
   * @param {string} name */
  stringList(name) {
    return [...(this.typed(name, "string-list") ?? [])];
  }
  /** The value of the parameter `name` if it is of `type`, `undefined` when it has none.
   * @template {keyof ParamTypes} T
   * @param {string} name
   * @param {T} type
   * @returns {ParamTypes[T] | undefined} */
  typed(name, type) {
    const value = this.values.get(name);
    if (value === undefined) return undefined;
    if (value.tag !== type) {
      throw new InvalidParameters(
        `parameter \`${name}\` is not of type ${type} (it is ${value.tag}); the plugin's describe and gather disagree`,
      );
    }
    return /** @type {ParamTypes[T]} */ (value.val);
  }
}

/** @template V @param {string} name @param {V | undefined} value @returns {V} */
function required(name, value) {
  if (value === undefined) {
    throw new InvalidParameters(`parameter \`${name}\` has no value; declare it required or give it a default`);
  }
  return value;
}
