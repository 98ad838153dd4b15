// `mounts`: the file systems mounted on this host, from the kernel's mount table.
//
// A JavaScript plugin written with the factbuoy-plugin SDK (guest-sdk/js). Build and run:
//
//     factbuoy plugin build
//     factbuoy plugin run target/mounts.wasm --grant mounts:read:/proc -p types=ext4,xfs

import {
  Artifact,
  Capability,
  Description,
  InvalidParameters,
  Param,
  Unavailable,
  exportGatherer,
  fs,
  output,
  progress,
} from "./factbuoy-plugin/index.js";

/** The mount table of the factbuoy process, as the kernel writes it (fstab's format). */
const MOUNTS = "/proc/self/mounts";

/** A field of the mount table: space, tab, newline and backslash are written as octal escapes. */
function unescape(field) {
  return field.replace(/\\([0-7]{3})/g, (_, octal) => String.fromCharCode(parseInt(octal, 8)));
}

/** One entry per line of the mount table, in the kernel's order. */
function parseMounts(text) {
  return text
    .split("\n")
    .filter((line) => line.trim() !== "")
    .map((line) => {
      const [device, mountPoint, type, options] = line.split(" ");
      const flags = options.split(",");
      return {
        device: unescape(device),
        mount_point: unescape(mountPoint),
        type,
        read_only: flags.includes("ro"),
        options: flags,
      };
    });
}

export const plugin = exportGatherer({
  describe() {
    return new Description("mounts", "0.1.0", "The file systems mounted on this host, from /proc/self/mounts.")
      .param(
        Param.stringList("types").describe(
          "Only file systems of these types, for example ext4,xfs (default: every type).",
        ),
      )
      .param(Param.boolean("read-only").default("false").describe("Only file systems mounted read-only."))
      .capability(Capability.read("/proc"), "reads the mount table, /proc/self/mounts")
      .artifact(
        Artifact.facts("mounts.json", "device, mount point, type and options of each mount").listKeys("mounts", [
          "mount_point",
        ]),
      );
  },

  gather(params) {
    const types = params.stringList("types");
    const bad = types.filter((type) => !/^[a-z0-9._-]+$/.test(type));
    if (bad.length > 0) throw new InvalidParameters(`types ${bad.join(", ")} are not file system type names`);
    let text;
    try {
      text = fs.readText(MOUNTS);
    } catch (error) {
      if (error.name === "FsError") throw new Unavailable(`cannot read the mount table: ${error.message}`);
      throw error;
    }
    const all = parseMounts(text);
    const mounts = all.filter(
      (m) => (types.length === 0 || types.includes(m.type)) && (!params.boolean("read-only") || m.read_only),
    );
    progress.report(1, 1, `${mounts.length} of ${all.length} mounts`);
    output.writeJson("mounts.json", { mounts });
  },
});
