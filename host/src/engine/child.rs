//! The compile child, `mlrb __compile-component LEN OUT`: reads LEN bytes
//! of a component from stdin, compiles them with the host's engine
//! configuration and writes the artifact to OUT. Its limits (address
//! space, no core dumps, a lower priority) are set by the parent before it
//! starts (`gate`); the parent kills it at the deadline, and it ends by
//! itself when its stdin closes, so a parent that dies takes it along.

use std::io::{Read, Write};
use std::process::ExitCode;

/// The hidden first argument that makes `mlrb` a compile child.
pub const ARG: &str = "__compile-component";

/// Exit code: not a valid component (stderr has the one-line reason).
pub const INVALID: u8 = 2;

/// Exit code: the parent went away (stdin closed) before the end.
pub const ORPHANED: u8 = 3;

/// Runs the compile child when the process was started as one.
pub fn main_if_asked() -> Option<ExitCode> {
    let mut args = std::env::args_os().skip(1);
    if args.next()? != ARG {
        return None;
    }
    let (Some(len), Some(out)) = (args.next(), args.next()) else {
        eprintln!("usage: mlrb {ARG} LEN OUT (started by mlrb itself)");
        return Some(ExitCode::from(64));
    };
    let Some(len) = len.to_str().and_then(|l| l.parse::<usize>().ok()) else {
        eprintln!("{ARG}: LEN must be a number of bytes");
        return Some(ExitCode::from(64));
    };
    Some(run(len, std::path::Path::new(&out)))
}

fn run(len: usize, out: &std::path::Path) -> ExitCode {
    let mut wasm = vec![0u8; len];
    let mut stdin = std::io::stdin().lock();
    if stdin.read_exact(&mut wasm).is_err() {
        return ExitCode::from(ORPHANED);
    }
    drop(stdin);
    // The parent holds the pipe open while it waits: EOF means it is gone.
    // (A file given as stdin, as scripts/bench_compile_gate.sh does, is no lifeline.)
    let piped = rustix::fs::fstat(std::io::stdin())
        .is_ok_and(|s| rustix::fs::FileType::from_raw_mode(s.st_mode) == rustix::fs::FileType::Fifo);
    if piped {
        std::thread::spawn(|| {
            let _ = std::io::stdin().read(&mut [0u8; 1]);
            std::process::exit(ORPHANED.into());
        });
    }
    let engine = match wasmtime::Engine::new(&super::config()) {
        Ok(engine) => engine,
        Err(error) => {
            eprintln!("starting the compiler: {error:#}");
            return ExitCode::FAILURE;
        }
    };
    let artifact = match engine.precompile_component(&wasm) {
        Ok(artifact) => artifact,
        Err(error) => {
            eprintln!("{}", super::describe_compile_error(error.into()));
            return ExitCode::from(INVALID);
        }
    };
    drop(wasm);
    let written = std::fs::OpenOptions::new()
        .write(true)
        .truncate(true)
        .open(out)
        .and_then(|mut file| file.write_all(&artifact).and_then(|()| file.sync_all()));
    match written {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("writing the compiled artifact to {}: {error}", out.display());
            ExitCode::FAILURE
        }
    }
}
