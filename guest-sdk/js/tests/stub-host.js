// Stand-ins for the host's interfaces, one module instance per interface (the query names it),
// recording what the SDK sends. Tests change their behaviour through `globalThis.stubHost`.
const host = (globalThis.stubHost ??= { artifacts: {}, logs: [], reports: [], files: {}, failWrite: undefined });

// output
export function create(name, mediaType) {
  if (name.includes("..")) throw Object.assign(new Error("output-error"), { payload: { tag: "invalid-name", val: name } });
  const chunks = (host.artifacts[name] = { mediaType, chunks: [], finished: false });
  return {
    write(chunk) {
      if (host.failWrite) throw Object.assign(new Error("output-error"), { payload: host.failWrite });
      chunks.chunks.push(Uint8Array.from(chunk));
    },
    finish() {
      chunks.finished = true;
    },
  };
}

// logging
export function log(level, message) {
  host.logs.push([level, message]);
}

// progress
export function report(update) {
  host.reports.push(update);
}

// host-info
export function uptimeSeconds() {
  return 42n;
}

// preopens: `host.files` maps a granted root to {relative path: text}.
function fsError(code) {
  return Object.assign(new Error(code), { payload: code });
}
export function getDirectories() {
  return Object.entries(host.files).map(([root, files]) => [
    {
      openAt(_pathFlags, path, openFlags) {
        if (openFlags.directory) {
          const names = Object.keys(files).filter((f) => f.startsWith(path === "." ? "" : path + "/"));
          if (names.length === 0) throw fsError("no-entry");
          const entries = names.map((f) => ({ type: "regular-file", name: f.slice(path === "." ? 0 : path.length + 1) }));
          return { readDirectory: () => ({ readDirectoryEntry: () => entries.shift() }) };
        }
        if (!(path in files)) throw fsError("no-entry");
        const bytes = new TextEncoder().encode(files[path]);
        return {
          read(length, offset) {
            const chunk = bytes.slice(Number(offset), Number(offset + length));
            return [chunk, Number(offset) + chunk.length >= bytes.length];
          },
        };
      },
    },
    root,
  ]);
}
