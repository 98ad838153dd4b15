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

/** An artifact a plugin writes; start with the function for its kind. */
export class Artifact {
  constructor(name, mediaType, description, kind) {
    this.spec = { name, mediaType, description, kind };
  }
  /** One JSON document about the node, an object at its top (`application/json`): `inspect
   * facts`, `query`, `diff` and `sql` read it. Name the keys of its lists with `listKeys`. */
  static facts(name, description) {
    return new Artifact(name, "application/json", description, { tag: "facts", val: [] });
  }
  /** JSON Lines (`application/jsonl`): one JSON object per line, one row per item; `inspect sql`
   * makes it a table named `<plugin>_<artifact>`. Name the columns that identify a row with
   * `rowKeys`. */
  static table(name, description) {
    return new Artifact(name, "application/jsonl", description, { tag: "table", val: [] });
  }
  /** Time-ordered entries, one JSON object per line with the journal's field names
   * (`__REALTIME_TIMESTAMP`, `MESSAGE`, `PRIORITY`), as `journalctl -o json` writes them. */
  static log(name, description) {
    return new Artifact(name, "application/jsonl", description, { tag: "log" });
  }
  /** Anything else, of media type `mediaType`: kept in the bundle, not interpreted. */
  static opaque(name, mediaType, description) {
    return new Artifact(name, mediaType, description, { tag: "opaque" });
  }
  /** Says the items of the list at `path` (field names from the document's top, joined by `.`:
   * `mounts`, or `interfaces.addresses` for the lists inside each interface) are told apart by
   * the fields `keys`, so a diff shows an item added, removed or changed instead of every later
   * position changing. For facts documents. */
  listKeys(path, keys) {
    if (this.spec.kind.tag === "facts") {
      this.spec.kind.val.push({ path, keys: [...keys] });
    }
    return this;
  }
  /** Says the columns `keys` identify a row. For tables. */
  rowKeys(keys) {
    if (this.spec.kind.tag === "table") {
      this.spec.kind.val = [...keys];
    }
    return this;
  }
  /** Overrides the media type its kind gives it. */
  mediaType(mediaType) {
    this.spec.mediaType = mediaType;
    return this;
  }
}

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
  /** Declares an artifact the plugin writes (an `Artifact`) and what kind of data it holds,
   * which tells `factbuoy inspect` how to read it. */
  artifact(artifact) {
    if (!(artifact instanceof Artifact)) {
      throw new TypeError("artifact takes an Artifact: Artifact.facts(name, description), .table, .log or .opaque");
    }
    this.info.artifacts.push(artifact.spec);
    return this;
  }
}
