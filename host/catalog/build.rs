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
/// Where to build the plugins instead of `wasm-plugins` beside the outer target directory.
const PLUGIN_TARGET_DIR_VAR: &str = "FACTBUOY_PLUGIN_TARGET_DIR";

fn main() {
    let manifest_dir = PathBuf::from(env::var_os("CARGO_MANIFEST_DIR").unwrap());
    // host/catalog -> the workspace root.
    let workspace = manifest_dir.ancestors().nth(2).unwrap();
    let out_dir = PathBuf::from(env::var_os("OUT_DIR").unwrap());
    for watched in [
        "plugins",
        "guest-sdk",
        "linux",
        "wit",
        "Cargo.toml",
        "Cargo.lock",
    ] {
        println!(
            "cargo:rerun-if-changed={}",
            workspace.join(watched).display()
        );
    }

    ensure_wasm_target();
    let plugins = plugin_crates(&workspace.join("plugins"));
    // A target directory of our own, since the outer cargo holds the lock on its own one:
    // `wasm-plugins` beside the outer build's, unless FACTBUOY_PLUGIN_TARGET_DIR names one.
    // The plugins are the same whatever the host's target, so a cross build
    // (deploy/cross-build.sh) shares the native build's rather than compiling them again.
    println!("cargo:rerun-if-env-changed={PLUGIN_TARGET_DIR_VAR}");
    let target_dir = match env::var_os(PLUGIN_TARGET_DIR_VAR) {
        Some(dir) => PathBuf::from(dir),
        None => out_dir
            .ancestors()
            .nth(4)
            .unwrap_or(&out_dir)
            .join("wasm-plugins"),
    };
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

/// Adds the wasm target to the toolchain building us when it lacks it and rustup manages it.
/// rust-toolchain.toml names the target, but rustup installs the targets it names only together
/// with the toolchain: a machine that already had the toolchain (or that sets
/// `RUSTUP_AUTO_INSTALL=0`) would otherwise fail the first build with "can't find crate for
/// `std`". Without rustup, the build's error below says what to install.
fn ensure_wasm_target() {
    let rustc = env::var_os("RUSTC").unwrap_or_else(|| "rustc".into());
    let sysroot = Command::new(&rustc)
        .args(["--print", "sysroot"])
        .output()
        .ok()
        .filter(|out| out.status.success())
        .map(|out| PathBuf::from(String::from_utf8_lossy(&out.stdout).trim()));
    let installed = sysroot.is_some_and(|root| root.join("lib/rustlib").join(WASM_TARGET).is_dir());
    // rustup names the toolchain it runs in the environment of everything below it.
    let (false, Some(toolchain)) = (installed, env::var_os("RUSTUP_TOOLCHAIN")) else {
        return;
    };
    println!(
        "cargo:warning=adding the {WASM_TARGET} target to the {} toolchain (rustup target add), \
         to build the bundled plugins",
        toolchain.to_string_lossy()
    );
    let added = Command::new("rustup")
        .args(["target", "add", WASM_TARGET, "--toolchain"])
        .arg(&toolchain)
        .status();
    if !added.is_ok_and(|status| status.success()) {
        println!(
            "cargo:warning=`rustup target add {WASM_TARGET}` failed; the plugin build below \
             will say why it cannot build"
        );
    }
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
        "building the bundled plugins for {WASM_TARGET} failed (see the output above); if it \
         says \"can't find crate for `std`\", this Rust lacks the {WASM_TARGET} target: `rustup \
         target add {WASM_TARGET}`, or without rustup, install it as this Rust was installed"
    );
}
