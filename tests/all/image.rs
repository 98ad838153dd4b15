//! The image for linux/amd64 and linux/arm64 (deploy/README.md): factbuoy cross-built for arm64
//! (deploy/cross-build.sh, its cargo target directory cached in /var/cache/factbuoy/cross-target)
//! runs under qemu-user as it would on an arm64 node — `version`, a bundled plugin, a whole local
//! run whose bundle this machine's binary verifies — and deploy/build-image.sh packs both
//! binaries into one image index whose layers hold what deploy/README.md lists.
//!
//! `cargo test -p factbuoy --test all image::` runs it; tests/prerequisites.sh installs the cross
//! compiler, the arm64 C library, qemu-user-static, skopeo and the Rust target. The first cross
//! build on a machine takes long (deploy/README.md has the figures); tests/suite.sh makes it
//! before the tests, so that here it only checks that it is up to date.

use std::collections::BTreeMap;
use std::io::Read;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

use sha2::{Digest, Sha256};

use crate::support;

/// Where Debian's cross C library (libc6-dev-arm64-cross) keeps the arm64 loader and libraries.
const ARM64_SYSROOT: &str = "/usr/aarch64-linux-gnu";

/// The arm64 binary, built (or found up to date) by deploy/cross-build.sh once per test binary.
fn arm64_binary() -> &'static Path {
    static BINARY: OnceLock<PathBuf> = OnceLock::new();
    BINARY.get_or_init(|| {
        let built = Command::new(support::workspace().join("deploy/cross-build.sh"))
            .output()
            .expect("running deploy/cross-build.sh");
        assert!(
            built.status.success(),
            "deploy/cross-build.sh failed (tests/prerequisites.sh installs what it needs): {}",
            text(&built.stderr)
        );
        let path = PathBuf::from(text(&built.stdout).trim());
        assert_eq!(
            elf_machine(&std::fs::read(&path).unwrap()),
            "AArch64",
            "{}",
            path.display()
        );
        path
    })
}

/// `qemu-aarch64-static -L <arm64 sysroot> BINARY ARGS`, with a private cache and state.
fn qemu(state: &Path, args: &[&str]) -> Output {
    Command::new("qemu-aarch64-static")
        .arg("-L")
        .arg(ARM64_SYSROOT)
        .arg(arm64_binary())
        .args(args)
        .env("FACTBUOY_CACHE_DIR", state.join("cache"))
        .env("FACTBUOY_STATE_DIR", state.join("state"))
        .output()
        .expect("running qemu-aarch64-static (apt-get install qemu-user-static)")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// The machine an ELF header names, as readelf spells it.
fn elf_machine(elf: &[u8]) -> &'static str {
    assert_eq!(&elf[..4], b"\x7fELF", "not an ELF file");
    match u16::from_le_bytes([elf[18], elf[19]]) {
        0x3e => "X86-64",
        0xb7 => "AArch64",
        other => panic!("ELF machine {other:#x}"),
    }
}

#[test]
fn the_arm64_binary_runs_a_plugin_and_a_local_run_under_qemu() {
    let work = tempfile::tempdir().unwrap();
    let state = work.path();

    let version = qemu(state, &["version"]);
    assert!(version.status.success(), "{}", text(&version.stderr));
    let said = text(&version.stdout);
    assert!(
        said.contains(env!("CARGO_PKG_VERSION")) && said.contains("hello"),
        "{said}"
    );

    // The bundled plugin, compiled by the arm64 binary's own Cranelift for arm64.
    let hello = qemu(
        state,
        &["plugin", "run", "hello", "--grant", "hello:host-info"],
    );
    assert!(hello.status.success(), "{}", text(&hello.stderr));
    let greeting: serde_json::Value = serde_json::from_slice(&hello.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", text(&hello.stdout)));
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap();
    assert_eq!(greeting["kernel"], kernel.trim(), "{greeting}");

    // A whole local run: aggregator, agent and plugin over mutual TLS, then the bundle, which
    // this machine's own binary verifies and reads.
    let out = state.join("out");
    let run = qemu(
        state,
        &[
            "run",
            "--node",
            "arm64-node",
            "--plugin",
            "hello",
            "--out",
            out.to_str().unwrap(),
        ],
    );
    assert!(run.status.success(), "{}", text(&run.stderr));
    let bundles: Vec<PathBuf> = std::fs::read_dir(&out)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(bundles.len(), 1, "{bundles:?}");
    let verify = support::factbuoy()
        .args(["inspect", "verify"])
        .arg(&bundles[0])
        .output()
        .unwrap();
    assert!(
        verify.status.success(),
        "{}{}",
        text(&verify.stdout),
        text(&verify.stderr)
    );
    let query = support::factbuoy()
        .args(["inspect", "query"])
        .arg(&bundles[0])
        .args(["kernel", "-o", "json"])
        .output()
        .unwrap();
    assert!(query.status.success(), "{}", text(&query.stderr));
    let answer: serde_json::Value = serde_json::from_slice(&query.stdout).unwrap();
    let node = &answer["nodes"][0];
    assert_eq!(node["node"], "arm64-node", "{answer}");
    assert_eq!(node["plugins"][0]["plugin"], "hello", "{answer}");
    assert_eq!(node["plugins"][0]["values"][0], kernel.trim(), "{answer}");
}

/// An OCI image layout archive's files, by path.
fn archive_files(path: &Path) -> BTreeMap<String, Vec<u8>> {
    support::tar_files(std::fs::File::open(path).unwrap())
}

/// The blob a descriptor points at, checked against its digest and size.
fn blob<'a>(files: &'a BTreeMap<String, Vec<u8>>, descriptor: &serde_json::Value) -> &'a [u8] {
    let digest = descriptor["digest"].as_str().unwrap();
    let bytes = &files[&format!("blobs/sha256/{}", digest.strip_prefix("sha256:").unwrap())];
    assert_eq!(
        format!("sha256:{}", hex::encode(Sha256::digest(bytes))),
        digest
    );
    assert_eq!(descriptor["size"], bytes.len());
    bytes
}

fn json(bytes: &[u8]) -> serde_json::Value {
    serde_json::from_slice(bytes).unwrap()
}

/// What deploy/README.md says each platform's layer holds, besides its libraries.
const COMMON: &[&str] = &[
    "bin/",
    "bin/factbuoy",
    "dev/",
    "etc/",
    "etc/factbuoy/",
    "etc/group",
    "etc/passwd",
    "etc/ssl/",
    "etc/ssl/certs/",
    "etc/ssl/certs/ca-certificates.crt",
    "host/",
    "proc/",
    "sys/",
    "tmp/",
    "var/",
    "var/lib/",
    "var/lib/factbuoy/",
    "var/spool/",
    "var/spool/factbuoy/",
];
/// The loader and libraries, where each architecture's loader looks for them.
const AMD64_LIBS: &[&str] = &[
    "lib/",
    "lib/x86_64-linux-gnu/",
    "lib/x86_64-linux-gnu/libc.so.6",
    "lib/x86_64-linux-gnu/libgcc_s.so.1",
    "lib/x86_64-linux-gnu/libm.so.6",
    "lib64/",
    "lib64/ld-linux-x86-64.so.2",
];
const ARM64_LIBS: &[&str] = &[
    "lib/",
    "lib/aarch64-linux-gnu/",
    "lib/aarch64-linux-gnu/libc.so.6",
    "lib/aarch64-linux-gnu/libgcc_s.so.1",
    "lib/aarch64-linux-gnu/libm.so.6",
    "lib/ld-linux-aarch64.so.1",
];

/// Section names of an ELF file, by readelf.
fn sections(path: &Path) -> String {
    let out = Command::new("readelf")
        .args(["-S", "-W"])
        .arg(path)
        .env("LC_ALL", "C")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    text(&out.stdout)
}

#[test]
fn the_image_index_holds_amd64_and_arm64_with_their_own_libraries_and_no_debug_info() {
    let work = tempfile::tempdir().unwrap();
    let archive = work.path().join("image.tar");
    let reference = "factbuoy.local/factbuoy:multi";
    // This test binary's factbuoy has line tables (the dev profile), so its debug file is
    // written; the cross-built one has none and is packed as it is.
    let amd64 = Path::new(env!("CARGO_BIN_EXE_factbuoy"));
    let built = Command::new(support::workspace().join("deploy/build-image.sh"))
        .arg("--platform")
        .arg(format!("linux/amd64={}", amd64.display()))
        .arg("--platform")
        .arg(format!("linux/arm64={}", arm64_binary().display()))
        .arg(reference)
        .arg(&archive)
        .output()
        .unwrap();
    assert!(built.status.success(), "{}", text(&built.stderr));

    let files = archive_files(&archive);
    let top = json(&files["index.json"]);
    let entries = top["manifests"].as_array().unwrap();
    assert_eq!(entries.len(), 1, "{top}");
    assert_eq!(
        entries[0]["mediaType"],
        "application/vnd.oci.image.index.v1+json"
    );
    assert_eq!(
        entries[0]["annotations"]["io.containerd.image.name"],
        reference
    );
    let index = json(blob(&files, &entries[0]));
    let platforms: Vec<String> = index["manifests"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            let platform = &m["platform"];
            format!(
                "{}/{}",
                platform["os"].as_str().unwrap(),
                platform["architecture"].as_str().unwrap()
            )
        })
        .collect();
    assert_eq!(platforms, ["linux/amd64", "linux/arm64"]);

    let mut manifest_digests = BTreeMap::new();
    for entry in index["manifests"].as_array().unwrap() {
        let arch = entry["platform"]["architecture"].as_str().unwrap();
        manifest_digests.insert(arch, entry["digest"].as_str().unwrap().to_owned());
        let manifest = json(blob(&files, entry));
        let config = json(blob(&files, &manifest["config"]));
        assert_eq!(config["architecture"], arch);
        assert_eq!(config["config"]["Entrypoint"][0], "/bin/factbuoy");
        let layers = manifest["layers"].as_array().unwrap();
        assert_eq!(layers.len(), 1, "{manifest}");
        assert_eq!(
            layers[0]["mediaType"],
            "application/vnd.oci.image.layer.v1.tar+gzip"
        );
        let mut layer = Vec::new();
        flate2::read::GzDecoder::new(blob(&files, &layers[0]))
            .read_to_end(&mut layer)
            .unwrap();
        assert_eq!(
            config["rootfs"]["diff_ids"][0],
            format!("sha256:{}", hex::encode(Sha256::digest(&layer))),
            "the diff_id is the uncompressed layer's digest"
        );

        // Its files: what deploy/README.md lists, root-owned, dated 1970, of this architecture.
        let (libs, machine) = match arch {
            "amd64" => (AMD64_LIBS, "X86-64"),
            _ => (ARM64_LIBS, "AArch64"),
        };
        let mut expected: Vec<&str> = COMMON.iter().chain(libs).copied().collect();
        expected.push("./");
        expected.sort();
        let mut listed = Vec::new();
        let unpacked = work.path().join(arch);
        let mut entries = tar::Archive::new(&layer[..]);
        for file in entries.entries().unwrap() {
            let mut file = file.unwrap();
            let header = file.header().clone();
            let name = file.path().unwrap().to_string_lossy().into_owned();
            assert_eq!(
                (header.uid().unwrap(), header.gid().unwrap()),
                (0, 0),
                "{name}"
            );
            assert_eq!(header.mtime().unwrap(), 0, "{name}");
            let name = name.trim_start_matches("./").to_owned();
            if header.entry_type().is_file() {
                let mut bytes = Vec::new();
                file.read_to_end(&mut bytes).unwrap();
                if name.starts_with("bin/") || name.starts_with("lib") {
                    assert_eq!(elf_machine(&bytes), machine, "{arch}: {name}");
                }
                let path = unpacked.join(&name);
                std::fs::create_dir_all(path.parent().unwrap()).unwrap();
                std::fs::write(&path, bytes).unwrap();
                let mode = header.mode().unwrap();
                std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
            }
            listed.push(if name.is_empty() {
                "./".to_owned()
            } else {
                name
            });
        }
        listed.sort();
        assert_eq!(listed, expected, "{arch}'s layer");
        let binary = sections(&unpacked.join("bin/factbuoy"));
        // (.debug_gdb_scripts is not debug info: a loaded section naming gdb's pretty-printers.)
        assert!(
            !binary.contains(".debug_info") && !binary.contains(".debug_line"),
            "{arch}: debug info in the image: {binary}"
        );
        if arch == "amd64" {
            assert!(
                !binary.contains(".symtab") && binary.contains(".gnu_debuglink"),
                "{binary}"
            );
        } else {
            // The layer alone as the root: the arm64 loader and libraries are where the binary
            // asks for them (qemu looks up every path under -L first).
            let started = Command::new("qemu-aarch64-static")
                .arg("-L")
                .arg(&unpacked)
                .arg(unpacked.join("bin/factbuoy"))
                .arg("--version")
                .output()
                .unwrap();
            assert!(
                started.status.success() && text(&started.stdout).starts_with("factbuoy "),
                "the arm64 layer's binary: {}{}",
                text(&started.stdout),
                text(&started.stderr)
            );
        }
    }

    // The debug file beside the archive symbolises an address of the image's binary: by itself
    // (addr2line), and found through the binary's debuglink (gdb).
    let debug = work.path().join("image.amd64.debug");
    let symbols = Command::new("nm").arg("-C").arg(&debug).output().unwrap();
    let symbols = text(&symbols.stdout);
    let address = symbols
        .lines()
        .find(|l| l.ends_with(" factbuoy::main"))
        .and_then(|l| l.split_whitespace().next())
        .unwrap_or_else(|| panic!("no factbuoy::main in {}", debug.display()));
    let line = Command::new("addr2line")
        .arg("-e")
        .arg(&debug)
        .arg(address)
        .output()
        .unwrap();
    // A line of the binary's own crate: main.rs, or lib.rs where main's call was inlined (as a
    // build without incremental compilation does).
    assert!(
        text(&line.stdout).contains("host/cli/src/") && !text(&line.stdout).contains("??"),
        "addr2line: {}{}",
        text(&line.stdout),
        text(&line.stderr)
    );
    let bin = work.path().join("amd64/bin");
    std::fs::copy(&debug, bin.join("factbuoy.debug")).unwrap();
    let gdb = Command::new("gdb")
        .args(["-nx", "-batch", "-ex"])
        .arg(format!("info line *0x{address}"))
        .arg(bin.join("factbuoy"))
        .output()
        .expect("running gdb (apt-get install gdb)");
    assert!(
        text(&gdb.stdout).contains("host/cli/src/"),
        "gdb: {}{}",
        text(&gdb.stdout),
        text(&gdb.stderr)
    );
    assert!(!work.path().join("image.arm64.debug").exists());

    // One binary alone gives the same image as in the index, digest for digest, whatever the
    // archive is called (the build is deterministic); its ELF header names its platform.
    for (arch, binary) in [("amd64", amd64), ("arm64", arm64_binary())] {
        let single = work.path().join(format!("other-name-{arch}.tar"));
        let built = Command::new(support::workspace().join("deploy/build-image.sh"))
            .arg(binary)
            .arg(reference)
            .arg(&single)
            .output()
            .unwrap();
        assert!(built.status.success(), "{}", text(&built.stderr));
        let top = json(&archive_files(&single)["index.json"]);
        assert_eq!(
            top["manifests"][0]["digest"], manifest_digests[arch],
            "{top}"
        );
        assert_eq!(top["manifests"][0]["platform"]["architecture"], arch);
    }

    // skopeo, as a registry copy would, reads every platform of the archive.
    let copied = work.path().join("copied");
    let copy = Command::new("skopeo")
        .args(["copy", "--all", "--quiet"])
        .arg(format!("oci-archive:{}", archive.display()))
        .arg(format!("oci:{}:multi", copied.display()))
        .output()
        .expect("running skopeo (apt-get install skopeo)");
    assert!(copy.status.success(), "skopeo: {}", text(&copy.stderr));
    let raw = Command::new("skopeo")
        .args(["inspect", "--raw"])
        .arg(format!("oci:{}:multi", copied.display()))
        .output()
        .unwrap();
    assert_eq!(json(&raw.stdout)["manifests"].as_array().unwrap().len(), 2);
}
