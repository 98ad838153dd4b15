//! Compiles every plugin crate under `plugins/` for wasm32-wasip2 and generates `bundled.rs`,
//! which embeds the components in the `factbuoy` binary with their sha-256 digests, so one binary
//! serves as CLI, agent and aggregator and an air-gapped host needs nothing else.

use std::env;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

use sha2::{Digest, Sha256};

const WASM_TARGET: &str = "wasm32-wasip2";
const PLUGIN_PROFILE: &str = "plugin";

fn main() {
    let manifest_dir = PathBuf::from(env::var_os("CARGO_MANIFEST_DIR").unwrap());
    // host/catalog -> the workspace root.
    let workspace = manifest_dir.ancestors().nth(2).unwrap();
    let out_dir = PathBuf::from(env::var_os("OUT_DIR").unwrap());
    for watched in ["plugins", "guest-sdk", "wit", "Cargo.toml", "Cargo.lock"] {
        println!(
            "cargo:rerun-if-changed={}",
            workspace.join(watched).display()
        );
    }

    let plugins = plugin_crates(&workspace.join("plugins"));
    // A target directory of our own: the outer cargo holds the lock on its own one.
    let target_dir = out_dir
        .ancestors()
        .nth(4)
        .unwrap_or(&out_dir)
        .join("wasm-plugins");
    build(workspace, &target_dir, &plugins);

    let mut generated = String::from("/// Plugins compiled into this binary, by name.\n");
    generated.push_str("pub static BUNDLED: &[BundledPlugin] = &[\n");
    for name in &plugins {
        let wasm = target_dir
            .join(WASM_TARGET)
            .join(PLUGIN_PROFILE)
            .join(format!("{}.wasm", name.replace('-', "_")));
        let bytes = std::fs::read(&wasm)
            .unwrap_or_else(|e| panic!("reading the built plugin {}: {e}", wasm.display()));
        let digest = hex::encode(Sha256::digest(&bytes));
        writeln!(
            generated,
            "    BundledPlugin {{ name: {name:?}, wasm: include_bytes!({:?}), sha256: {digest:?} }},",
            wasm.display()
        )
        .unwrap();
    }
    generated.push_str("];\n");
    std::fs::write(out_dir.join("bundled.rs"), generated).unwrap();
}

/// Package names of the plugin crates: every directory under `plugins/` with a Cargo.toml.
fn plugin_crates(plugins_dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(plugins_dir)
        .expect("reading plugins/")
        .filter_map(|entry| entry.ok())
        .filter(|entry| entry.path().join("Cargo.toml").is_file())
        .map(|entry| entry.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

fn build(workspace: &Path, target_dir: &Path, plugins: &[String]) {
    let cargo = env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut command = Command::new(cargo);
    command
        .current_dir(workspace)
        .args([
            "build",
            "--target",
            WASM_TARGET,
            "--profile",
            PLUGIN_PROFILE,
        ])
        .arg("--target-dir")
        .arg(target_dir);
    for name in plugins {
        command.args(["-p", name]);
    }
    // Flags meant for the host build (coverage, sanitizers, target-cpu) must not leak into the
    // wasm build, and the outer target selection must not override ours. Nor must `cargo
    // clippy`'s driver and its `-D warnings`, which would lint the plugins as a side effect.
    for var in [
        "CARGO_ENCODED_RUSTFLAGS",
        "RUSTFLAGS",
        "CARGO_BUILD_TARGET",
        "CARGO_TARGET_DIR",
        "CARGO_BUILD_RUSTFLAGS",
        "RUSTC_WORKSPACE_WRAPPER",
        "CLIPPY_ARGS",
    ] {
        command.env_remove(var);
    }
    let status = command
        .status()
        .expect("running cargo to build the bundled plugins");
    assert!(
        status.success(),
        "building the bundled plugins for {WASM_TARGET} failed (see the output above); \
         the target is installed by rust-toolchain.toml: `rustup target add {WASM_TARGET}` if it is missing"
    );
}
