// Builders for what a plugin says about itself in `describe`.

/** Something beyond pure computation that a plugin asks for. */
export const Capability = {
  /** Call the `hostInfo` functions. */
  HOST_INFO: Object.freeze({ tag: "host-info" }),
  /** Read files below this absolute path, for example `/proc`; the host maps it read-only onto
   * the same path below the host root. */
  read(path) {
    return Object.freeze({ tag: "read-path", val: path });
  },
};

/** One parameter a plugin accepts; start with the function for its type. */
export class Param {
  constructor(name, type) {
    this.spec = { name, description: "", type, required: false, default: undefined, secret: false };
  }
  /** Any text. */
  static string(name) {
    return new Param(name, "string");
  }
  /** A signed integer (read it with `params.integer`, a Number, or `params.bigint`). */
  static integer(name) {
    return new Param(name, "integer");
  }
  /** A 64-bit float. */
  static float(name) {
    return new Param(name, "float");
  }
  /** `true` or `false`. */
  static boolean(name) {
    return new Param(name, "boolean");
  }
  /** A span of time such as `60m`; read it with `params.durationMs`. */
  static duration(name) {
    return new Param(name, "duration");
  }
  /** A list of text values, comma-separated or repeated on the command line. */
  static stringList(name) {
    return new Param(name, "string-list");
  }
  /** What the parameter means, for `factbuoy plugin info`. */
  describe(description) {
    this.spec.description = description;
    return this;
  }
  /** The user must give a value. */
  required() {
    this.spec.required = true;
    return this;
  }
  /** The value used when the user gives none, written as a user would (`60m`, `a,b`). */
  default(value) {
    this.spec.default = String(value);
    return this;
  }
  /** The host never logs the value nor writes it into a bundle. */
  secret() {
    this.spec.secret = true;
    return this;
  }
}

/** What a plugin is: its name, version, parameters, capabilities and artifacts. */
export class Description {
  /** `name` is lower-case `a-z`, `0-9` and `-`; `version` is semver. */
  constructor(name, version, description) {
    this.info = { name, version, description, parameters: [], capabilities: [], artifacts: [] };
  }
  /** Declares a parameter. */
  param(param) {
    this.info.parameters.push({ ...param.spec });
    return this;
  }
  /** Asks for a capability `gather` cannot work without; the host refuses to run the plugin
   * unless it is granted. `reason` is shown to the operator. */
  capability(capability, reason) {
    this.info.capabilities.push({ capability, required: true, reason });
    return this;
  }
  /** Asks for a capability the plugin can do without (it must cope with its absence). */
  optionalCapability(capability, reason) {
    this.info.capabilities.push({ capability, required: false, reason });
    return this;
  }
  /** Declares an artifact the plugin writes. */
  artifact(name, mediaType, description) {
    this.info.artifacts.push({ name, mediaType, description });
    return this;
  }
}
