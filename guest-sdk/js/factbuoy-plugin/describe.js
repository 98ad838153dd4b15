// Builders for what a plugin says about itself in `describe`.

/** @typedef {import("./index.js").CapabilityValue} CapabilityValue */
/** @typedef {{ path: string, keys: string[] }} ListKeys */
/** @typedef {{ tag: "facts", val: ListKeys[] } | { tag: "table", val: string[] } | { tag: "log" } | { tag: "opaque" }} ArtifactKind */
/** @typedef {{ name: string, mediaType: string, description: string, kind: ArtifactKind }} ArtifactSpec */
/** @typedef {"string" | "integer" | "float" | "boolean" | "duration" | "string-list"} ParamType */
/** @typedef {{ name: string, description: string, type: ParamType, required: boolean, default: string | undefined, secret: boolean }} ParamSpec */
/** @typedef {{ capability: CapabilityValue, required: boolean, reason: string }} CapabilityRequest */

/** Something beyond pure computation that a plugin asks for. */
export const Capability = {
  /** Call the `hostInfo` functions. */
  HOST_INFO: /** @type {CapabilityValue} */ (Object.freeze({ tag: "host-info" })),
  /** Read files below this absolute path, for example `/proc`; the host maps it read-only onto
   * the same path below the host root.
   * @param {string} path
   * @returns {CapabilityValue} */
  read(path) {
    return Object.freeze({ tag: "read-path", val: path });
  },
};

/** An artifact a plugin writes; start with the function for its kind. */
export class Artifact {
  /** @param {string} name @param {string} mediaType @param {string} description
   * @param {ArtifactKind} kind */
  constructor(name, mediaType, description, kind) {
    /** @type {ArtifactSpec} */
    this.spec = { name, mediaType, description, kind };
  }
  /** One JSON document about the node, an object at its top (`application/json`): `inspect
   * facts`, `query`, `diff` and `sql` read it. Name the keys of its lists with `listKeys`.
   * @param {string} name @param {string} description */
  static facts(name, description) {
    return new Artifact(name, "application/json", description, { tag: "facts", val: [] });
  }
  /** JSON Lines (`application/jsonl`): one JSON object per line, one row per item; `inspect sql`
   * makes it a table named `<plugin>_<artifact>`. Name the columns that identify a row with
   * `rowKeys`.
   * @param {string} name @param {string} description */
  static table(name, description) {
    return new Artifact(name, "application/jsonl", description, { tag: "table", val: [] });
  }
  /** Time-ordered entries, one JSON object per line with the journal's field names
   * (`__REALTIME_TIMESTAMP`, `MESSAGE`, `PRIORITY`), as `journalctl -o json` writes them.
   * @param {string} name @param {string} description */
  static log(name, description) {
    return new Artifact(name, "application/jsonl", description, { tag: "log" });
  }
  /** Anything else, of media type `mediaType`: kept in the bundle, not interpreted. */
  /** @param {string} name @param {string} mediaType @param {string} description */
  static opaque(name, mediaType, description) {
    return new Artifact(name, mediaType, description, { tag: "opaque" });
  }
  /** Says the items of the list at `path` (field names from the document's top, joined by `.`:
   * `mounts`, or `interfaces.addresses` for the lists inside each interface) are told apart by
   * the fields `keys`, so a diff shows an item added, removed or changed instead of every later
   * position changing. For facts documents. */
  /** @param {string} path @param {Iterable<string>} keys @returns {this} */
  listKeys(path, keys) {
    if (this.spec.kind.tag === "facts") {
      this.spec.kind.val.push({ path, keys: [...keys] });
    }
    return this;
  }
  /** Says the columns `keys` identify a row. For tables. */
  /** @param {Iterable<string>} keys @returns {this} */
  rowKeys(keys) {
    if (this.spec.kind.tag === "table") {
      this.spec.kind.val = [...keys];
    }
    return this;
  }
  /** Overrides the media type its kind gives it. */
  /** @param {string} mediaType @returns {this} */
  mediaType(mediaType) {
    this.spec.mediaType = mediaType;
    return this;
  }
}

/** One parameter a plugin accepts; start with the function for its type. */
export class Param {
  /** @param {string} name @param {ParamType} type */
  constructor(name, type) {
    /** @type {ParamSpec} */
    this.spec = { name, description: "", type, required: false, default: undefined, secret: false };
  }
  /** Any text. */
  /** @param {string} name */
  static string(name) {
    return new Param(name, "string");
  }
  /** A signed integer (read it with `params.integer`, a Number, or `params.bigint`). */
  /** @param {string} name */
  static integer(name) {
    return new Param(name, "integer");
  }
  /** A 64-bit float. */
  /** @param {string} name */
  static float(name) {
    return new Param(name, "float");
  }
  /** `true` or `false`. */
  /** @param {string} name */
  static boolean(name) {
    return new Param(name, "boolean");
  }
  /** A span of time such as `60m`; read it with `params.durationMs`. */
  /** @param {string} name */
  static duration(name) {
    return new Param(name, "duration");
  }
  /** A list of text values, comma-separated or repeated on the command line. */
  /** @param {string} name */
  static stringList(name) {
    return new Param(name, "string-list");
  }
  /** What the parameter means, for `factbuoy plugin info`. */
  /** @param {string} description @returns {this} */
  describe(description) {
    this.spec.description = description;
    return this;
  }
  /** The user must give a value. */
  /** @returns {this} */
  required() {
    this.spec.required = true;
    return this;
  }
  /** The value used when the user gives none, written as a user would (`60m`, `a,b`). */
  /** @param {string | number | boolean} value @returns {this} */
  default(value) {
    this.spec.default = String(value);
    return this;
  }
  /** The host never logs the value nor writes it into a bundle. */
  /** @returns {this} */
  secret() {
    this.spec.secret = true;
    return this;
  }
}

/** What a plugin is: its name, version, parameters, capabilities and artifacts. */
export class Description {
  /** `name` is lower-case `a-z`, `0-9` and `-`; `version` is semver. */
  /** @param {string} name @param {string} version @param {string} description */
  constructor(name, version, description) {
    /** @type {{ name: string, version: string, description: string, parameters: ParamSpec[], capabilities: CapabilityRequest[], artifacts: ArtifactSpec[] }} */
    this.info = { name, version, description, parameters: [], capabilities: [], artifacts: [] };
  }
  /** Declares a parameter. */
  /** @param {Param} param @returns {this} */
  param(param) {
    this.info.parameters.push({ ...param.spec });
    return this;
  }
  /** Asks for a capability `gather` cannot work without; the host refuses to run the plugin
   * unless it is granted. `reason` is shown to the operator. */
  /** @param {CapabilityValue} capability @param {string} reason @returns {this} */
  capability(capability, reason) {
    this.info.capabilities.push({ capability, required: true, reason });
    return this;
  }
  /** Asks for a capability the plugin can do without (it must cope with its absence). */
  /** @param {CapabilityValue} capability @param {string} reason @returns {this} */
  optionalCapability(capability, reason) {
    this.info.capabilities.push({ capability, required: false, reason });
    return this;
  }
  /**
   * Declares an artifact the plugin writes (an `Artifact`) and what kind of data it holds,
   * which tells `factbuoy inspect` how to read it.
   * @overload
   * @param {Artifact} artifact
   * @returns {this}
   */
  /**
   * Declares an artifact by name, media type and description; it gets the kind its media type
   * implies (JSON: facts, JSON Lines: a table, anything else: opaque), as the host gives a 0.1
   * plugin's.
   * @deprecated since 0.2: declare the kind, `artifact(Artifact.facts(name, description))`,
   * `.table`, `.log` or `.opaque`.
   * @overload
   * @param {string} name
   * @param {string} mediaType
   * @param {string} description
   * @returns {this}
   */
  /**
   * @param {Artifact | string} artifact
   * @param {string} [mediaType]
   * @param {string} [description]
   * @returns {this}
   */
  artifact(artifact, mediaType, description) {
    if (typeof artifact === "string" && mediaType !== undefined && description !== undefined) {
      artifact = new Artifact(artifact, mediaType, description, kindOf(mediaType));
    }
    if (!(artifact instanceof Artifact)) {
      throw new TypeError("artifact takes an Artifact: Artifact.facts(name, description), .table, .log or .opaque");
    }
    this.info.artifacts.push(artifact.spec);
    return this;
  }
}

/** The kind an artifact of `mediaType` declared without one has: what the host's
 * `ArtifactKind::from_media_type` (protocol/src/artifacts.rs) gives a 0.1 plugin's.
 * @param {string} mediaType
 * @returns {ArtifactKind} */
function kindOf(mediaType) {
  const essence = mediaType.split(";")[0].trim().toLowerCase();
  if (["application/jsonl", "application/x-ndjson", "application/x-jsonlines", "application/jsonlines"].includes(essence)) {
    return { tag: "table", val: [] };
  }
  if (essence === "application/json" || (essence.startsWith("application/") && essence.endsWith("+json"))) {
    return { tag: "facts", val: [] };
  }
  return { tag: "opaque" };
}
