//! Loading a task folder with a large `env/`: an MLAgentBench folder of
//! 2 GiB (200 files of 10 MiB) loaded once (every file hashed) and again
//! (the hashes kept by size, times and inode are reused), then with one
//! file changed. Target: a second load under 100 ms.

use std::io::Write;
use std::time::Instant;

fn main() {
    let tmp = tempfile::tempdir().unwrap();
    // SAFETY: set before any thread starts; the loader reads it.
    unsafe { std::env::set_var("MLRB_CACHE_DIR", tmp.path().join("cache")) };
    let root = tmp.path().join("big-task");
    std::fs::create_dir_all(root.join("env/data")).unwrap();
    std::fs::create_dir_all(root.join("scripts")).unwrap();
    std::fs::write(root.join("scripts/research_problem.txt"), "Do better.\n").unwrap();
    std::fs::write(root.join("scripts/eval.py"), "def get_score(f):\n    return 1\n").unwrap();
    std::fs::write(root.join("env/train.py"), "print(1)\n").unwrap();
    let mut block = vec![0u8; 10 << 20];
    for i in 0..200u32 {
        block[..4].copy_from_slice(&i.to_le_bytes());
        std::fs::File::create(root.join(format!("env/data/part-{i:03}.bin")))
            .and_then(|mut f| f.write_all(&block))
            .unwrap();
    }
    let load = || {
        let started = Instant::now();
        let task = mlrb::task::Task::load(&root).unwrap();
        (started.elapsed().as_secs_f64() * 1000.0, task.spec.version)
    };
    let (first, v1) = load();
    let mut second = Vec::new();
    for _ in 0..5 {
        second.push(load().0);
    }
    second.sort_by(f64::total_cmp);
    let (_, v2) = load();
    assert_eq!(v1, v2);
    std::fs::write(root.join("env/data/part-007.bin"), b"changed").unwrap();
    let (changed, v3) = load();
    assert_ne!(v1, v3, "a changed file changes the version");
    println!("task load, 2 GiB MLAgentBench folder (200 x 10 MiB): first {first:.0} ms (every file hashed)");
    println!("task load, again: {:.1} ms (median of 5; target < 100 ms)", second[2]);
    println!("task load, one file changed: {changed:.1} ms");
}
