//! A program driven through a real pseudo-terminal, as a person at a
//! terminal would: lines typed into its master side, the screen read back.

use std::ffi::CStr;
use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::FromRawFd;
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, ExitStatus};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How long a test waits for the screen to show something before it fails
/// (a hang guard, not a timing).
pub const PATIENCE: Duration = Duration::from_secs(600);

/// A child on a pseudo-terminal: its controlling terminal, stdin, stdout
/// and stderr all the pty's slave side.
pub struct Pty {
    master: File,
    child: Child,
    screen: Arc<Mutex<Vec<u8>>>,
    /// Where the next `expect` starts reading the screen.
    seen: usize,
}

impl Pty {
    /// Starts `command` on a new pseudo-terminal, in a session of its own.
    pub fn spawn(mut command: Command) -> Pty {
        // SAFETY: plain libc calls on descriptors this function owns.
        let (master, slave_path) = unsafe {
            let fd = libc::posix_openpt(libc::O_RDWR | libc::O_NOCTTY | libc::O_CLOEXEC);
            assert!(fd >= 0, "posix_openpt: {}", std::io::Error::last_os_error());
            assert_eq!(libc::grantpt(fd), 0, "grantpt");
            assert_eq!(libc::unlockpt(fd), 0, "unlockpt");
            let mut name = [0 as libc::c_char; 128];
            assert_eq!(libc::ptsname_r(fd, name.as_mut_ptr(), name.len()), 0, "ptsname_r");
            let path = CStr::from_ptr(name.as_ptr()).to_string_lossy().into_owned();
            // A terminal of a usual size (a new pty has none), as narrow as
            // the width mlrb's output keeps to.
            let size = libc::winsize {
                ws_row: 40,
                ws_col: 100,
                ws_xpixel: 0,
                ws_ypixel: 0,
            };
            libc::ioctl(fd, libc::TIOCSWINSZ as _, &size);
            (File::from_raw_fd(fd), path)
        };
        let slave = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(&slave_path)
            .unwrap();
        command
            .stdin(slave.try_clone().unwrap())
            .stdout(slave.try_clone().unwrap())
            .stderr(slave);
        // SAFETY: only async-signal-safe calls between fork and exec.
        unsafe {
            command.pre_exec(|| {
                if libc::setsid() < 0 || libc::ioctl(0, libc::TIOCSCTTY as _, 0) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let child = command.spawn().unwrap();
        // The slave's last copies here go with the command: the screen ends
        // (EIO) once the child and what it started are gone.
        drop(command);
        let screen = Arc::new(Mutex::new(Vec::new()));
        let mut reader = master.try_clone().unwrap();
        let into = screen.clone();
        std::thread::spawn(move || {
            let mut buf = [0u8; 8192];
            while let Ok(n) = reader.read(&mut buf) {
                if n == 0 {
                    break;
                }
                into.lock().unwrap().extend_from_slice(&buf[..n]);
            }
        });
        Pty {
            master,
            child,
            screen,
            seen: 0,
        }
    }

    /// Types `line` and Enter.
    pub fn type_line(&mut self, line: &str) {
        self.master.write_all(format!("{line}\n").as_bytes()).unwrap();
    }

    /// Types `bytes` as they are (Ctrl-C is `\x03`).
    pub fn type_raw(&mut self, bytes: &[u8]) {
        self.master.write_all(bytes).unwrap();
    }

    /// Types Ctrl-D at the start of a line: the end of input.
    pub fn type_eof(&mut self) {
        self.master.write_all(b"\x04").unwrap();
    }

    /// Everything the screen showed so far.
    pub fn screen(&self) -> String {
        String::from_utf8_lossy(&self.screen.lock().unwrap()).into_owned()
    }

    /// Waits until the screen shows `needle` after what earlier calls
    /// matched; what it showed up to the end of the match.
    pub fn expect(&mut self, needle: &str) -> String {
        let started = Instant::now();
        loop {
            let screen = self.screen.lock().unwrap().clone();
            let text = String::from_utf8_lossy(&screen[self.seen.min(screen.len())..]).into_owned();
            if let Some(at) = text.find(needle) {
                let end = at + needle.len();
                self.seen += text[..end].len();
                return text[..end].to_string();
            }
            if started.elapsed() > PATIENCE || self.child.try_wait().unwrap().is_some() && !self.grows() {
                panic!("the screen never showed {needle:?}; it shows:\n{}", self.screen());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Whether the screen still gains text (a child that exited may still
    /// have output on its way).
    fn grows(&self) -> bool {
        let before = self.screen.lock().unwrap().len();
        std::thread::sleep(Duration::from_millis(300));
        self.screen.lock().unwrap().len() != before
    }

    /// Kills the child (SIGKILL) and waits for it.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Waits for the child to exit.
    pub fn wait(&mut self) -> ExitStatus {
        let started = Instant::now();
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status;
            }
            if started.elapsed() > PATIENCE {
                let _ = self.child.kill();
                panic!("the program never exited; the screen shows:\n{}", self.screen());
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

impl Drop for Pty {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
