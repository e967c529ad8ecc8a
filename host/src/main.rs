fn main() -> std::process::ExitCode {
    mlrb::cli::main()
}
