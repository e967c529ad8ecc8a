//! The compile gate from outside, through the real `mlrb` binary: compile
//! bombs (a function with thousands of locals live across thousands of joins) refused at the
//! deadline or the memory limit by `mlrb agent check` and by the
//! submission service, leaving nothing in the compile cache, while another
//! submitter's upload goes through; quota and uploads in flight refused
//! before a byte of the body is read; a client that hangs up takes its
//! compile child with it.

mod common;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use common::cluster::{answer, request};

/// The hidden argument of a compile child (engine::child::ARG).
const CHILD_ARG: &[u8] = b"__compile-component";

/// A component whose one core function has `n` i64 locals, all live
/// around a loop through `n` blocks that each join two paths: a few bytes
/// per block, and a value per local at every join for the compiler (at
/// 6,000, 173 KB that take 80 CPU-seconds and 1.3 GiB to compile).
fn join_bomb(n: u32) -> Vec<u8> {
    use wasm_encoder::{
        BlockType, CodeSection, Function, FunctionSection, Instruction as I, Module, TypeSection, ValType,
    };
    let mut module = Module::new();
    let mut types = TypeSection::new();
    types.ty().function([], []);
    module.section(&types);
    let mut functions = FunctionSection::new();
    functions.function(0);
    module.section(&functions);
    let mut body = Function::new([(n, ValType::I64)]);
    let add = |body: &mut Function, i: u32| {
        body.instruction(&I::LocalGet(i));
        body.instruction(&I::LocalGet((i + 1) % n));
        body.instruction(&I::I64Add);
        body.instruction(&I::LocalSet(i));
    };
    body.instruction(&I::Loop(BlockType::Empty));
    for j in 0..n {
        body.instruction(&I::Block(BlockType::Empty));
        body.instruction(&I::LocalGet(j));
        body.instruction(&I::I32WrapI64);
        body.instruction(&I::BrIf(0));
        add(&mut body, j);
        body.instruction(&I::End);
    }
    for i in 0..n {
        add(&mut body, i);
    }
    body.instruction(&I::LocalGet(0));
    body.instruction(&I::I32WrapI64);
    body.instruction(&I::BrIf(0));
    body.instruction(&I::End);
    body.instruction(&I::End);
    let mut code = CodeSection::new();
    code.function(&body);
    module.section(&code);
    let mut component = wasm_encoder::Component::new();
    component.section(&wasm_encoder::ModuleSection(&module));
    component.finish()
}

fn sha256(bytes: &[u8]) -> String {
    hex::encode(<sha2::Sha256 as sha2::Digest>::digest(bytes))
}

/// The files of a compile cache (`<cache>/compiled`) other than its key.
fn cache_files(cache: &Path) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir(cache.join("compiled")) else {
        return Vec::new();
    };
    let mut names: Vec<String> = entries
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n != "cache.key")
        .collect();
    names.sort();
    names
}

/// The compile children below process `pid`.
fn compile_children(pid: u32) -> Vec<u32> {
    common::processes_under(pid, 1, |args| args.get(1) == Some(&CHILD_ARG))
}

/// Waits until process `pid` has a compile child; its pid.
fn wait_for_compile_child(pid: u32, within: Duration) -> u32 {
    let started = Instant::now();
    loop {
        if let Some(child) = compile_children(pid).first() {
            return *child;
        }
        assert!(started.elapsed() < within, "no compile child was started");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn agent_check_refuses_a_compile_bomb_at_the_deadline_and_the_memory_limit() {
    let dir = tempfile::tempdir().unwrap();
    let bomb = dir.path().join("bomb.wasm");
    let bytes = join_bomb(4_000);
    std::fs::write(&bomb, &bytes).unwrap();
    let cache = dir.path().join("cache");
    let check = |env: &[(&str, &str)]| {
        let started = Instant::now();
        let out = common::mlrb()
            .env("MLRB_CACHE_DIR", &cache)
            .envs(env.iter().copied())
            .args(["agent", "check"])
            .arg(&bomb)
            .output()
            .unwrap();
        println!("agent check {env:?}: {:.1} s", started.elapsed().as_secs_f64());
        assert!(!out.status.success());
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    let slow = check(&[("MLRB_COMPILE_SECONDS", "1")]);
    assert!(slow.contains("compilation took longer than 1 s"), "{slow}");
    let big = check(&[("MLRB_COMPILE_SECONDS", "600"), ("MLRB_COMPILE_MEMORY_MIB", "200")]);
    assert!(big.contains("compilation needed more than 200 MiB"), "{big}");
    assert!(big.lines().count() == 1, "one line: {big}");
    assert_eq!(
        cache_files(&cache),
        Vec::<String>::new(),
        "a refused compile left files"
    );
    let bad = common::mlrb()
        .env("MLRB_COMPILE_SECONDS", "soon")
        .args(["agent", "check"])
        .arg(&bomb)
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&bad.stderr);
    assert!(said.contains("MLRB_COMPILE_SECONDS=`soon`"), "{said}");
}

/// `mlrb serve --submissions` with its own compile cache and limits.
struct Served {
    child: Child,
    url: String,
    cache: PathBuf,
}

impl Served {
    fn start(dir: &Path, quota: &str, compile_seconds: &str) -> (Self, String, String) {
        let service = dir.join("service");
        let made = common::mlrb()
            .args(["submissions", "init"])
            .arg(&service)
            .output()
            .unwrap();
        assert!(made.status.success(), "{}", String::from_utf8_lossy(&made.stderr));
        let toml = format!(
            "name = \"cpu-mini\"\nversion = \"1\"\ncloses = \"2099-01-01T00:00:00Z\"\nmax_agent_mb = 16\n[plan]\ntasks = [\"digits\"]\nseeds = 1\nretries = 0\n[quota]\n{quota}\n"
        );
        std::fs::write(service.join("benchmarks/cpu-mini.toml"), toml).unwrap();
        let token = |name: &str| {
            let out = common::mlrb()
                .args(["submissions", "add-submitter"])
                .arg(&service)
                .arg(name)
                .output()
                .unwrap();
            assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
            String::from_utf8(out.stdout).unwrap().trim().to_string()
        };
        let (alice, bob) = (token("alice"), token("bob"));
        let cache = dir.join("cache");
        let mut child = common::mlrb()
            .env("MLRB_CACHE_DIR", &cache)
            .env("MLRB_COMPILE_SECONDS", compile_seconds)
            // The deadline, not the memory limit, is what these tests meet.
            .env("MLRB_COMPILE_MEMORY_MIB", "8192")
            .args(["serve", "--submissions"])
            .arg(&service)
            .args(["--listen", "127.0.0.1:0"])
            .stderr(Stdio::piped())
            .stdout(Stdio::null())
            .spawn()
            .unwrap();
        let url = served_url(&mut child);
        (Self { child, url, cache }, alice, bob)
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }
}

/// Reads the service's stderr up to its "serving submissions" line.
fn served_url(child: &mut Child) -> String {
    use std::io::Read;
    let mut stderr = child.stderr.take().unwrap();
    let mut seen = Vec::new();
    let mut byte = [0u8; 1];
    let url = loop {
        let text = String::from_utf8_lossy(&seen).into_owned();
        if let Some(line) = text.lines().find(|l| l.starts_with("serving submissions"))
            && text.ends_with('\n')
        {
            break line.rsplit(' ').next().unwrap().trim_end_matches('/').to_string();
        }
        match stderr.read(&mut byte) {
            Ok(1) => seen.push(byte[0]),
            _ => panic!("the service ended before serving: {text}"),
        }
    };
    std::thread::spawn(move || std::io::copy(&mut stderr, &mut std::io::sink()));
    url
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

const UPLOAD: &str = "/v1/submissions?benchmark=cpu-mini/1&agent=a";

fn upload(url: &str, token: &str, bytes: &[u8]) -> (u16, String) {
    let auth = format!("Bearer {token}");
    let headers = [("Authorization", auth.as_str()), ("Content-Type", "application/wasm")];
    request(url, "POST", UPLOAD, &headers, bytes)
}

/// An upload's headers alone, declaring `length` bytes that never come.
fn headers_only(url: &str, token: &str, length: usize) -> (u16, String) {
    let address = url.trim_start_matches("http://");
    let stream = std::net::TcpStream::connect(address).unwrap();
    stream.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    let head = format!(
        "POST {UPLOAD} HTTP/1.1\r\nHost: {address}\r\nConnection: close\r\nAuthorization: Bearer {token}\r\nContent-Type: application/wasm\r\nContent-Length: {length}\r\n\r\n"
    );
    (&stream).write_all(head.as_bytes()).unwrap();
    answer(stream)
}

#[test]
fn a_compile_bomb_is_refused_at_the_deadline_while_another_submitter_uploads() {
    let dir = tempfile::tempdir().unwrap();
    let (served, alice, bob) = Served::start(dir.path(), "per_day = 100\nin_flight = 100\ncooldown_seconds = 0", "5");
    let bomb = join_bomb(6_000);
    let bombing = {
        let (url, bomb) = (served.url.clone(), bomb.clone());
        std::thread::spawn(move || upload(&url, &alice, &bomb))
    };
    let child = wait_for_compile_child(served.pid(), Duration::from_secs(60));
    // Another submitter's upload, compiled while the bomb compiles.
    let plain = std::fs::read(common::agent("other-world")).unwrap();
    let started = Instant::now();
    let (code, body) = upload(&served.url, &bob, &plain);
    let took = started.elapsed();
    println!(
        "another submitter's upload, during the bomb's compile: {:.2} s",
        took.as_secs_f64()
    );
    assert_eq!(code, 422, "{body}");
    assert!(body.contains("another world"), "it was compiled and checked: {body}");
    assert!(!bombing.is_finished(), "the bomb was still compiling");
    assert!(
        compile_children(served.pid()).contains(&child),
        "the bomb's child still ran"
    );
    let (code, body) = bombing.join().unwrap();
    assert_eq!(code, 422, "{body}");
    assert!(body.contains("compilation took longer than 5 s"), "{body}");
    assert!(compile_children(served.pid()).is_empty(), "the bomb's child was killed");
    let left: Vec<String> = cache_files(&served.cache);
    assert!(
        left.is_empty(),
        "refused components leave nothing in the cache: {left:?}"
    );
    assert!(!left.iter().any(|n| n.starts_with(&sha256(&bomb))));
}

#[test]
fn quota_and_uploads_in_flight_are_refused_before_the_body_is_read() {
    let dir = tempfile::tempdir().unwrap();
    let (served, alice, bob) = Served::start(dir.path(), "per_day = 1\nin_flight = 1\ncooldown_seconds = 0", "600");
    // A refused upload counts: alice has used her one a day.
    let (code, body) = upload(&served.url, &alice, b"\0asm\x0d\0\x01\0garbage");
    assert_eq!(code, 422, "{body}");
    // Her bomb is refused on its headers: no byte of it is ever sent.
    let bomb = join_bomb(6_000);
    let (code, body) = headers_only(&served.url, &alice, bomb.len());
    assert_eq!(code, 429, "{body}");
    assert!(body.contains("quota"), "{body}");
    let (code, body) = upload(&served.url, &alice, &bomb);
    assert_eq!(code, 429, "{body}");
    assert!(
        compile_children(served.pid()).is_empty(),
        "nothing was compiled for alice"
    );
    // Bob's bomb compiles; a second upload of his is refused on its headers.
    let bombing = {
        let (url, bob, bomb) = (served.url.clone(), bob.clone(), bomb.clone());
        std::thread::spawn(move || upload(&url, &bob, &bomb))
    };
    wait_for_compile_child(served.pid(), Duration::from_secs(60));
    let (code, body) = headers_only(&served.url, &bob, 100);
    assert_eq!(code, 429, "{body}");
    assert!(body.contains("another upload of yours"), "{body}");
    assert_eq!(compile_children(served.pid()).len(), 1, "one compile for bob");
    drop(served);
    let _ = bombing.join();
}

#[test]
fn a_client_that_hangs_up_takes_its_compile_child_along() {
    let dir = tempfile::tempdir().unwrap();
    let (served, alice, _) = Served::start(
        dir.path(),
        "per_day = 100\nin_flight = 100\ncooldown_seconds = 0",
        "600",
    );
    let bomb = join_bomb(6_000);
    let address = served.url.trim_start_matches("http://").to_string();
    let mut stream = std::net::TcpStream::connect(&address).unwrap();
    let head = format!(
        "POST {UPLOAD} HTTP/1.1\r\nHost: {address}\r\nAuthorization: Bearer {alice}\r\nContent-Type: application/wasm\r\nContent-Length: {}\r\n\r\n",
        bomb.len()
    );
    stream.write_all(head.as_bytes()).unwrap();
    stream.write_all(&bomb).unwrap();
    let child = wait_for_compile_child(served.pid(), Duration::from_secs(60));
    drop(stream);
    let started = Instant::now();
    while compile_children(served.pid()).contains(&child) {
        // Far less than the 600 s deadline: the hang-up, not the deadline, ended it.
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "the compile child outlived its client"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    println!(
        "compile child gone {:.2} s after the client hung up",
        started.elapsed().as_secs_f64()
    );
    assert!(!cache_files(&served.cache).iter().any(|n| n.starts_with(&sha256(&bomb))));
}
