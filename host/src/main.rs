fn main() -> std::process::ExitCode {
    factbuoy::cli::main()
}
