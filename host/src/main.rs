fn main() -> std::process::ExitCode {
    // A compile child of the gate starts nothing else (no runtime, no logs).
    if let Some(code) = mlrb::engine::child::main_if_asked() {
        return code;
    }
    mlrb::cli::main()
}
