//! Headless Chromium for the tests of pages mlrb renders (the report, the
//! trace viewer, the leaderboard): found, or the test skipped visibly
//! outside CI; a page's DOM once rendered.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Chromium, or None (test skipped) outside CI when it is not installed.
pub fn chromium() -> Option<PathBuf> {
    for name in ["chromium", "chromium-browser"] {
        let found = Command::new("sh")
            .args(["-c", &format!("command -v {name}")])
            .output()
            .unwrap();
        if found.status.success() {
            return Some(PathBuf::from(String::from_utf8_lossy(&found.stdout).trim()));
        }
    }
    if std::env::var("CI").is_ok_and(|v| v == "true") {
        panic!("chromium is required under CI=true (scripts/setup.sh installs it)");
    }
    eprintln!("SKIPPED: no chromium here");
    None
}

/// The DOM Chromium renders for `url`.
pub fn render(chromium: &Path, url: &str) -> String {
    let profile = tempfile::tempdir().unwrap();
    let mut child = Command::new(chromium)
        .args([
            "--headless=new",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            "--virtual-time-budget=5000",
        ])
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .args(["--dump-dom", url])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // Read while it runs: a page larger than the pipe would block it.
    let mut stdout = child.stdout.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut dom = String::new();
        std::io::Read::read_to_string(&mut stdout, &mut dom).unwrap();
        dom
    });
    let started = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if started.elapsed() > Duration::from_secs(90) {
            let _ = child.kill();
            panic!("chromium hung on {url}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    reader.join().unwrap()
}

/// How wide `page` (an HTML file) lays out in a `width`×`height` window:
/// (the document's scrollWidth, the window's innerWidth), and its DOM. The
/// page is measured from a copy with a measuring script added, as mlrb's
/// pages run none.
pub fn layout_width(chromium: &Path, page: &Path, (width, height): (u32, u32)) -> (u64, u64, String) {
    let html = std::fs::read_to_string(page).unwrap();
    let script = "<script>const m=document.createElement('pre');m.id='measured';\
        m.textContent=document.documentElement.scrollWidth+' '+window.innerWidth;\
        document.body.appendChild(m);</script></body>";
    let dir = tempfile::tempdir().unwrap();
    let copy = dir.path().join("measured.html");
    std::fs::write(&copy, html.replacen("</body>", script, 1)).unwrap();
    let profile = tempfile::tempdir().unwrap();
    let output = Command::new(chromium)
        .args(["--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run"])
        .arg(format!("--window-size={width},{height}"))
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .arg("--dump-dom")
        .arg(format!("file://{}", copy.display()))
        .stderr(Stdio::null())
        .output()
        .unwrap();
    let dom = String::from_utf8_lossy(&output.stdout).into_owned();
    let measured = dom
        .split("<pre id=\"measured\">")
        .nth(1)
        .and_then(|rest| rest.split('<').next())
        .unwrap_or_else(|| panic!("the page was not measured: {dom}"));
    let mut numbers = measured.split_whitespace().map(|n| n.parse::<u64>().unwrap());
    (numbers.next().unwrap(), numbers.next().unwrap(), dom)
}
