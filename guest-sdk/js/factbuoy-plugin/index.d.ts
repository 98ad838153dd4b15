// Typed declarations of the factbuoy JavaScript SDK (index.js), for editors and `tsc
// --checkJs`: the API of docs/plugins-js.md, and in `hostInfo` the contract's `host-info`
// interface (wit/gatherer.wit) as componentize-js hands it to JavaScript: camelCase names,
// 64-bit integers as BigInts, `option` as `undefined`. tests/all/plugin_authoring_js.rs checks
// that every function and field of `host-info` is declared here, and type-checks the template and
// the documented example against this file.

/** What `Capability.HOST_INFO` and `Capability.read(path)` make. */
export type CapabilityValue = { tag: "host-info" } | { tag: "read-path"; val: string };

/** Something beyond pure computation that a plugin asks for. */
export declare const Capability: {
  /** Call the `hostInfo` functions. */
  readonly HOST_INFO: CapabilityValue;
  /** Read files below this absolute path, for example `/proc`; the host maps it read-only onto
   * the same path below the host root. */
  read(path: string): CapabilityValue;
};

/** One parameter a plugin accepts; start with the function for its type. */
export declare class Param {
  /** Any text. */
  static string(name: string): Param;
  /** A signed integer (read it with `params.integer`, a Number, or `params.bigint`). */
  static integer(name: string): Param;
  /** A 64-bit float. */
  static float(name: string): Param;
  /** `true` or `false`. */
  static boolean(name: string): Param;
  /** A span of time such as `60m`; read it with `params.durationMs`. */
  static duration(name: string): Param;
  /** A list of text values, comma-separated or repeated on the command line. */
  static stringList(name: string): Param;
  /** What the parameter means, for `factbuoy plugin info`. */
  describe(description: string): Param;
  /** The user must give a value. */
  required(): Param;
  /** The value used when the user gives none, written as a user would (`60m`, `a,b`). */
  default(value: string | number | boolean): Param;
  /** The host never logs the value nor writes it into a bundle. */
  secret(): Param;
}

/** What a plugin is: its name, version, parameters, capabilities and artifacts. */
export declare class Description {
  /** `name` is lower-case `a-z`, `0-9` and `-`; `version` is semver. */
  constructor(name: string, version: string, description: string);
  /** Declares a parameter. */
  param(param: Param): Description;
  /** Asks for a capability `gather` cannot work without; the host refuses to run the plugin
   * unless it is granted. `reason` is shown to the operator. */
  capability(capability: CapabilityValue, reason: string): Description;
  /** Asks for a capability the plugin can do without (it must cope with its absence). */
  optionalCapability(capability: CapabilityValue, reason: string): Description;
  /** Declares an artifact the plugin writes and what kind of data it holds, which tells
   * `factbuoy inspect` how to read it. */
  artifact(artifact: Artifact): Description;
  /** Declares an artifact by name, media type and description; it gets the kind its media type
   * implies (JSON: facts, JSON Lines: a table, anything else: opaque), as the host gives a 0.1
   * plugin's.
   * @deprecated since 0.2: declare the kind, `artifact(Artifact.facts(name, description))`,
   * `.table`, `.log` or `.opaque`. */
  artifact(name: string, mediaType: string, description: string): Description;
}

/** An artifact a plugin writes; start with the function for its kind. */
export declare class Artifact {
  /** One JSON document about the node, an object at its top (`application/json`). */
  static facts(name: string, description: string): Artifact;
  /** JSON Lines (`application/jsonl`): one JSON object per line, one row per item; `inspect sql`
   * makes it a table named `<plugin>_<artifact>`. */
  static table(name: string, description: string): Artifact;
  /** Time-ordered entries with the journal's field names, one JSON object per line. */
  static log(name: string, description: string): Artifact;
  /** Anything else, of media type `mediaType`: kept in the bundle, not interpreted. */
  static opaque(name: string, mediaType: string, description: string): Artifact;
  /** The items of the list at `path` (`mounts`, `interfaces.addresses`) are told apart by the
   * fields `keys`. For facts documents. */
  listKeys(path: string, keys: string[]): Artifact;
  /** The columns `keys` identify a row. For tables. */
  rowKeys(keys: string[]): Artifact;
  /** Overrides the media type its kind gives it. */
  mediaType(mediaType: string): Artifact;
}

/** Base class of the failures `gather` may throw; throw one of its subclasses. */
export declare class GatherError extends Error {
  /** The contract's `gather-error` variant case. */
  readonly tag: "invalid-parameters" | "unavailable" | "failed";
}
/** The parameters were acceptable to the host but not to the plugin. */
export declare class InvalidParameters extends GatherError {}
/** What the plugin gathers does not exist here (no such file, a capability not granted). */
export declare class Unavailable extends GatherError {}
/** Anything else; the message says what went wrong. */
export declare class Failed extends GatherError {}

/** The parameters of one `gather` call, already checked by the host against `describe`. A type
 * mismatch means the plugin asked for a parameter under the wrong type: the accessors throw
 * `InvalidParameters` naming the parameter. */
export declare class Params {
  /** Whether the parameter has a value (given or defaulted). */
  has(name: string): boolean;
  /** A text parameter that has a value (required, or with a default). */
  string(name: string): string;
  /** A text parameter that may be absent. */
  optString(name: string): string | undefined;
  /** An integer parameter that has a value, as a Number; beyond 2^53 use `bigint`. */
  integer(name: string): number;
  /** An integer parameter that may be absent, as a Number. */
  optInteger(name: string): number | undefined;
  /** An integer parameter that has a value, as a BigInt. */
  bigint(name: string): bigint;
  /** An integer parameter that may be absent, as a BigInt. */
  optBigint(name: string): bigint | undefined;
  /** A float parameter that has a value. */
  float(name: string): number;
  /** A float parameter that may be absent. */
  optFloat(name: string): number | undefined;
  /** A boolean parameter that has a value. */
  boolean(name: string): boolean;
  /** A boolean parameter that may be absent. */
  optBoolean(name: string): boolean | undefined;
  /** A duration parameter that has a value, in milliseconds. */
  durationMs(name: string): number;
  /** A duration parameter that may be absent, in milliseconds. */
  optDurationMs(name: string): number | undefined;
  /** A list parameter; empty when absent. */
  stringList(name: string): string[];
}

/** What a gatherer is: `describe` says what the plugin is (and must not touch the host: it is
 * called to list and plan runs); `gather` writes artifacts with `output`, and throws a
 * `GatherError` subclass to fail with a message. */
export interface Gatherer {
  describe(): Description;
  gather(params: Params): void;
}

/** The contract's `plugin` export, which `exportGatherer` makes. */
export interface PluginExport {
  describe(): unknown;
  gather(values: Array<[string, unknown]>): void;
}

/** Makes the contract's `plugin` export from a gatherer (an object or a class instance).
 * Assign it to `plugin`: `export const plugin = exportGatherer({...})`. */
export declare function exportGatherer(gatherer: Gatherer): PluginExport;

/** Writing artifacts: named files streamed to the host chunk by chunk. */
export declare namespace output {
  /** Largest chunk handed to the host in one call. */
  const CHUNK_BYTES: number;
  /** One artifact being written. Call `close` to finish it and learn about errors. */
  class Artifact {
    /** Appends bytes, or a string encoded as UTF-8. */
    write(data: Uint8Array | string): void;
    /** Sends what is buffered and marks the artifact complete. */
    close(): void;
  }
  /** Starts an artifact named `name` (a relative path such as `facts.json` or `logs/kern.json`). */
  function create(name: string, mediaType: string): Artifact;
  /** Writes one whole artifact of bytes. */
  function writeBytes(name: string, mediaType: string, data: Uint8Array): void;
  /** Writes one whole text artifact, UTF-8 (`text/plain; charset=utf-8` unless told). */
  function writeText(name: string, text: string, mediaType?: string): void;
  /** Writes `rows` as a JSON Lines artifact (`application/jsonl`, a table), one compact JSON
   * value per line. */
  function writeJsonLines(name: string, rows: Iterable<unknown>): void;
  /** Writes `value` as one JSON artifact ending in a newline, compact unless `pretty`. BigInts
   * are written as numbers. */
  function writeJson(name: string, value: unknown, options?: { pretty?: boolean }): void;
}

/** Reading files below the paths the plugin was granted (`Capability.read(path)`). */
export declare namespace fs {
  /** A file system operation that failed; `code` is WASI's error code (`no-entry`, `access`,
   * `not-directory`, ...) or `not-granted` when no granted path covers the path. */
  class FsError extends Error {
    readonly path: string;
    readonly code: string;
  }
  /** The whole content of the file at `path` (absolute). */
  function readBytes(path: string): Uint8Array;
  /** The whole content of the file at `path` (absolute), decoded as UTF-8. */
  function readText(path: string): string;
  /** The names in the directory at `path` (absolute), sorted. */
  function readDir(path: string): string[];
}

/** Log records, shown by the host with the plugin's name attached. */
export declare const log: {
  trace(message: unknown): void;
  debug(message: unknown): void;
  info(message: unknown): void;
  warn(message: unknown): void;
  error(message: unknown): void;
};

/** Progress reports: shown by `factbuoy plugin run` and relayed to a run's status. */
export declare const progress: {
  /** `completed` of `total` units are done (`total` 0 when unknown). */
  report(completed: number | bigint, total: number | bigint, message: string): void;
  /** A problem that did not stop the plugin, for example a file it could not read. */
  warn(message: string): void;
  /** A problem that means part of the output is missing. */
  error(message: string): void;
};

/** Facts the host gathers for the plugin, the contract's `host-info` interface. Each call needs
 * `Capability.HOST_INFO`: without it, the call fails the plugin (`capability-denied`). */
export declare namespace hostInfo {
  /** The operating system and the machine's identity. */
  interface OsInfo {
    /** `linux`, `macos`, `windows`, ... */
    family: string;
    /** Distribution or product name, for example `Debian GNU/Linux`. */
    name?: string;
    /** Distribution version, for example `12`. */
    version?: string;
    /** Distribution id as in os-release `ID`, for example `debian`. */
    distributionId: string;
    kernelVersion?: string;
    /** Full kernel description, like `uname -v` plus release. */
    kernelLongVersion: string;
    hostname?: string;
    /** CPU architecture, for example `x86_64`. */
    architecture: string;
  }
  /** One logical CPU. */
  interface Cpu {
    /** Logical CPU name as the OS gives it, for example `cpu0`. */
    name: string;
    /** Vendor as the CPU reports it, for example `GenuineIntel`. */
    vendorId: string;
    /** Model name, for example `Intel(R) Xeon(R) CPU @ 2.20GHz`. */
    brand: string;
    /** Current frequency in MHz. */
    frequencyMhz: bigint;
  }
  /** Memory and swap, in bytes. */
  interface MemoryInfo {
    /** Physical memory installed. */
    totalBytes: bigint;
    /** Memory that can be given to new work without swapping (Linux `MemAvailable`). */
    availableBytes: bigint;
    /** Memory in use. */
    usedBytes: bigint;
    /** Memory not used for anything, not even caches (Linux `MemFree`). */
    freeBytes: bigint;
    swapTotalBytes: bigint;
    swapFreeBytes: bigint;
    swapUsedBytes: bigint;
  }
  /** A mounted file system. */
  interface Disk {
    /** Device name, for example `/dev/sda1` or `overlay`. */
    name: string;
    /** Where it is mounted, for example `/`. */
    mountPoint: string;
    /** File system type, for example `ext4`. */
    fileSystem: string;
    /** Size of the file system. */
    totalBytes: bigint;
    /** Space an unprivileged user can still use. */
    availableBytes: bigint;
    /** The device is removable (USB stick, CD). */
    removable: boolean;
    /** Mounted read-only. */
    readOnly: boolean;
  }
  /** An address assigned to an interface. */
  interface IpNetwork {
    /** Textual IPv4 or IPv6 address. */
    address: string;
    /** Network prefix length, for example 24 for a /24. */
    prefixLength: number;
  }
  /** A network interface and its counters since boot. */
  interface NetworkInterface {
    /** Interface name, for example `eth0`. */
    name: string;
    /** `aa:bb:cc:dd:ee:ff`. */
    macAddress: string;
    addresses: IpNetwork[];
    /** Maximum transmission unit in bytes. */
    mtu: bigint;
    /** Bytes received since boot. */
    receivedBytes: bigint;
    /** Bytes sent since boot. */
    transmittedBytes: bigint;
  }
  /** Run-queue load averages. */
  interface LoadAverages {
    one: number;
    five: number;
    fifteen: number;
  }
  /** Size and inode counts of the file system holding a path, as statvfs(3) reports them. */
  interface FilesystemStats {
    /** Fundamental block size (`f_frsize`): the unit of the block counts below. */
    fragmentSizeBytes: bigint;
    /** Preferred I/O block size (`f_bsize`). */
    blockSizeBytes: bigint;
    blocksTotal: bigint;
    blocksFree: bigint;
    /** Free blocks an unprivileged user may use (`f_bavail`). */
    blocksAvailable: bigint;
    inodesTotal: bigint;
    inodesFree: bigint;
    /** Free inodes an unprivileged user may use (`f_favail`). */
    inodesAvailable: bigint;
  }
  /** An IPv4 address as the kernel lists it: per interface, primary addresses first. */
  interface Ipv4Address {
    /** The interface it is assigned to, for example `eth0`. */
    device: string;
    /** The address's label: the interface name, or an alias such as `eth0:1`. */
    label: string;
    /** Dotted quad, for example `192.0.2.10`. */
    address: string;
    prefixLength: number;
    /** The broadcast address, when one is configured. */
    broadcast?: string;
    /** The other end of a point-to-point link, when this is one. */
    peer?: string;
  }
  /** One feature of a network interface, as the kernel's ethtool interface reports it. */
  interface NetFeature {
    /** The kernel's name, for example `tx-checksum-ipv4` or `rx-gro`. */
    name: string;
    /** The driver lets it be switched. */
    available: boolean;
    /** Asked for, by default or by the user. */
    requested: boolean;
    /** On now. */
    active: boolean;
    /** The kernel never lets it change. */
    neverChanged: boolean;
  }
  /** Time stamping capabilities of a network interface (`ETHTOOL_GET_TS_INFO`). */
  interface TimestampingInfo {
    /** `SOF_TIMESTAMPING_*` flags the interface supports, as the kernel's bit mask. */
    soTimestamping: number;
    /** Index of its PTP hardware clock (`/dev/ptp<index>`), when it has one. */
    phcIndex?: number;
    /** Supported `HWTSTAMP_TX_*` modes: bit n set means mode n. */
    txTypes: number;
    /** Supported `HWTSTAMP_FILTER_*` receive filters: bit n set means filter n. */
    rxFilters: number;
  }
  /** Why the kernel did not tell an interface's features or time stamping. */
  type EthtoolError =
    | { tag: "no-such-interface"; val: string }
    | { tag: "not-supported"; val: string }
    | { tag: "io"; val: string };
  /** A `result` of the contract inside a record: the value or the error. */
  type Result<T, E> = { tag: "ok"; val: T } | { tag: "err"; val: E };
  /** What `ethtool -k` and `ethtool -T` show for an interface. */
  interface EthtoolInfo {
    /** Every feature the kernel names, in the kernel's order. */
    features: Result<NetFeature[], EthtoolError>;
    timestamping: Result<TimestampingInfo, EthtoolError>;
  }

  /** The operating system and host identity. */
  function os(): OsInfo;
  /** Every logical CPU. */
  function cpus(): Cpu[];
  /** Physical core count, when the OS tells it. */
  function physicalCoreCount(): number | undefined;
  /** Memory and swap now. */
  function memory(): MemoryInfo;
  /** Mounted file systems with their usage. */
  function disks(): Disk[];
  /** Network interfaces, sorted by name. */
  function networkInterfaces(): NetworkInterface[];
  /** Load averages over 1, 5 and 15 minutes. */
  function loadAverage(): LoadAverages;
  /** Seconds since boot. */
  function uptimeSeconds(): bigint;
  /** Seconds since the Unix epoch. */
  function bootTimeSeconds(): bigint;
  /** Usage of the file systems mounted at `mountPoints` (absolute paths below the host root),
   * one entry per path in the same order; `undefined` where statvfs failed or did not answer
   * within a few seconds (a hung network mount). */
  function filesystemUsage(mountPoints: string[]): Array<FilesystemStats | undefined>;
  /** Every IPv4 address, in the kernel's order (what `ip -4 addr` shows). */
  function ipv4Addresses(): Ipv4Address[];
  /** Which of the marker paths `/.dockerenv`, `/.dockerinit`, `/.containerenv` and `/dev/kvm`
   * exist below the host root. */
  function existingMarkers(): string[];
  /** Whether the host root is another root directory than that of its process 1 (a chroot);
   * `undefined` when that cannot be told. */
  function isChroot(): boolean | undefined;
  /** The `TZ` environment variable of the process running factbuoy, when it is set. */
  function tzVariable(): string | undefined;
  /** Features and time stamping of the network interface `name`. */
  function ethtool(name: string): EthtoolInfo;
}
