//! The `factbuoy` binary; everything it does is in the package's library (src/lib.rs).

fn main() -> std::process::ExitCode {
    factbuoy::main()
}
