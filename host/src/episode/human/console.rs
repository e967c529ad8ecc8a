//! The person's terminal: lines typed (read on a thread of their own, so
//! the session can wait for a line, a command and the clock at once), what
//! the session prints, and the transcript of both kept in the episode.

use std::io::{BufRead, Write};
use std::path::Path;

use anyhow::{Context, Result};
use tokio::sync::mpsc;

/// Where a person's session reads and writes.
pub struct Console {
    lines: mpsc::UnboundedReceiver<String>,
    out: Box<dyn Write + Send>,
    transcript: Option<std::fs::File>,
}

impl Console {
    /// The process's own terminal: stdin and stdout.
    pub fn stdio() -> Self {
        let (send, lines) = mpsc::unbounded_channel();
        // Blocked in read() until a line or EOF; it ends with the process.
        std::thread::spawn(move || {
            let mut stdin = std::io::stdin().lock();
            loop {
                let mut line = String::new();
                match stdin.read_line(&mut line) {
                    Ok(0) | Err(_) => break,
                    Ok(_) => {
                        let line = line.trim_end_matches(['\n', '\r']).to_string();
                        if send.send(line).is_err() {
                            break;
                        }
                    }
                }
            }
        });
        Self {
            lines,
            out: Box::new(std::io::stdout()),
            transcript: None,
        }
    }

    /// Keeps everything shown and typed from now on in `path` (appended:
    /// a resumed session goes on with the same transcript).
    pub fn keep_transcript(&mut self, path: &Path) -> Result<()> {
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .with_context(|| format!("opening {}", path.display()))?;
        self.transcript = Some(file);
        Ok(())
    }

    /// Shows `text` (and keeps it in the transcript).
    pub fn show(&mut self, text: &str) {
        let _ = self.out.write_all(text.as_bytes());
        let _ = self.out.flush();
        if let Some(file) = &mut self.transcript {
            let _ = file.write_all(text.as_bytes());
        }
    }

    /// Shows `text` as a line of its own, wrapped to the terminal's width.
    pub fn say(&mut self, text: &str) {
        self.show(&format!("{}\n", crate::columns::wrap(text)));
    }

    /// The next line typed; `None` once the terminal is closed (Ctrl-D).
    /// The terminal echoed it; the transcript keeps it here.
    pub async fn read_line(&mut self) -> Option<String> {
        let line = self.lines.recv().await?;
        if let Some(file) = &mut self.transcript {
            let _ = writeln!(file, "{line}");
        }
        Some(line)
    }
}
