//! Copies the README's plugin example (the first ```rust block under "## Writing a plugin")
//! into OUT_DIR, where src/lib.rs includes it.

use std::path::Path;

fn main() {
    let manifest = std::env::var("CARGO_MANIFEST_DIR").unwrap();
    let readme = Path::new(&manifest).join("../../../README.md");
    println!("cargo::rerun-if-changed={}", readme.display());
    let text = std::fs::read_to_string(&readme).expect("reading the README");
    let section = text
        .split_once("## Writing a plugin")
        .expect("the README has a \"## Writing a plugin\" section")
        .1;
    let code = section
        .split_once("```rust\n")
        .and_then(|(_, rest)| rest.split_once("```"))
        .expect("the section has a ```rust block")
        .0;
    let out = Path::new(&std::env::var("OUT_DIR").unwrap()).join("readme_example.rs");
    std::fs::write(out, code).unwrap();
}
