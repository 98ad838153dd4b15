// Typed declarations of host.js, for `tsc --checkJs`: the contract's imports as componentize-js
// hands them to the SDK. TypeScript reads this file wherever the SDK imports `./host.js`, whose
// specifiers (`factbuoy:plugin/...@0.2.0`) only componentize-js resolves.

export { hostInfo } from "./index.js";

/** The contract's `logging` interface. */
export declare namespace logging {
  function log(level: "trace" | "debug" | "info" | "warn" | "error", message: string): void;
}

/** The contract's `output` interface; a refusal is thrown with the `output-error` as `payload`. */
export declare namespace output {
  /** An artifact being written, the contract's `artifact` resource. */
  interface HostArtifact {
    write(chunk: Uint8Array): void;
    finish(): void;
  }
  function create(name: string, mediaType: string): HostArtifact;
}

/** The contract's `progress` interface. */
export declare namespace progress {
  function report(update: {
    completed: bigint;
    total: bigint;
    message: string;
    warnings: string[];
    errors: string[];
  }): void;
}

/** The parts of `wasi:filesystem` the SDK's `fs` uses; a failure is thrown with WASI's error
 * code as `payload`. */
export declare namespace preopens {
  interface DirectoryEntry {
    name: string;
  }
  interface DirectoryEntryStream {
    readDirectoryEntry(): DirectoryEntry | undefined;
  }
  interface Descriptor {
    openAt(
      pathFlags: { symlinkFollow?: boolean },
      path: string,
      openFlags: { directory?: boolean },
      flags: { read?: boolean },
    ): Descriptor;
    read(length: bigint, offset: bigint): [Uint8Array, boolean];
    readDirectory(): DirectoryEntryStream;
  }
  function getDirectories(): Array<[Descriptor, string]>;
}
