//! Values of a record as text a page can hold: clipped to a bound however
//! large the record (a trace line may be megabytes), strings as they are,
//! anything else as JSON. Callers escape what these return.

use serde_json::Value;

/// `text`'s first `max` characters, with its length when it was longer.
pub fn clip(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        None => text.to_string(),
        Some((end, _)) => format!("{}… ({} bytes)", &text[..end], text.len()),
    }
}

/// A value as text of at most about `max` characters: a string itself, a
/// string the trace cut (`{"clipped", "bytes", "blake3"}`) with what it
/// cut, anything else as indented JSON.
pub fn shown(value: &Value, max: usize) -> String {
    match value {
        Value::String(s) => clip(s, max),
        Value::Null => String::new(),
        _ if is_cut(value) => format!(
            "{}… (cut in the trace at {} of {} bytes)",
            clip(value["clipped"].as_str().unwrap_or(""), max),
            value["clipped"].as_str().map_or(0, str::len),
            value["bytes"]
        ),
        _ => json(value, max, true),
    }
}

/// A value on one line of at most about `max` characters: a string's
/// first line, an object's fields as `key=value`, else compact JSON.
pub fn brief(value: &Value, max: usize) -> String {
    let text = match value {
        Value::String(s) => s.lines().next().unwrap_or("").to_string(),
        _ if is_cut(value) => return brief(&value["clipped"], max),
        Value::Object(map) => {
            let mut parts = Vec::new();
            for (key, field) in map.iter().take(6) {
                let shown = match field {
                    Value::String(s) => format!("{:?}", clip(s.lines().next().unwrap_or(""), 60)),
                    _ if is_cut(field) => format!("({} bytes)", field["bytes"]),
                    Value::Array(items) => format!("[{} items]", items.len()),
                    Value::Object(_) => "{…}".to_string(),
                    other => other.to_string(),
                };
                parts.push(format!("{key}={shown}"));
            }
            parts.join(", ")
        }
        _ => json(value, max, false),
    };
    clip(&text, max)
}

/// Whether `value` is a string the trace cut.
fn is_cut(value: &Value) -> bool {
    value.get("clipped").is_some_and(Value::is_string) && value.get("bytes").is_some()
}

/// `value` as JSON, written only up to `max` bytes (a 10 MB value is never
/// serialised whole for a page).
pub fn json(value: &Value, max: usize, pretty: bool) -> String {
    let mut out = Bounded {
        bytes: Vec::new(),
        max,
        full: false,
    };
    let _ = if pretty {
        serde_json::to_writer_pretty(&mut out, value)
    } else {
        serde_json::to_writer(&mut out, value)
    };
    let mut text = String::from_utf8_lossy(&out.bytes).into_owned();
    if out.full {
        text.push_str("… (cut here; the raw JSON has it all)");
    }
    text
}

/// A writer that keeps the first `max` bytes and then refuses more.
struct Bounded {
    bytes: Vec<u8>,
    max: usize,
    full: bool,
}

impl std::io::Write for Bounded {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let room = self.max.saturating_sub(self.bytes.len());
        if room == 0 {
            self.full = true;
            return Err(std::io::Error::other("page bound reached"));
        }
        let taken = buf.len().min(room);
        self.bytes.extend_from_slice(&buf[..taken]);
        Ok(taken)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn large_values_are_bounded() {
        assert!(clip(&"x".repeat(1000), 400).ends_with("(1000 bytes)"));
        assert_eq!(clip("short", 400), "short");
        let big = serde_json::json!({ "text": "é".repeat(5_000_000) });
        let shown = json(&big, 1000, true);
        assert!(
            shown.len() < 1100 && shown.ends_with("the raw JSON has it all)"),
            "{}",
            shown.len()
        );
        assert!(brief(&big, 100).chars().count() < 130, "{}", brief(&big, 100));
        let cut = serde_json::json!({"clipped": "head", "bytes": 99999, "blake3": "00"});
        assert!(shown_is(&cut, "head… (cut in the trace at 4 of 99999 bytes)"));
    }

    fn shown_is(value: &Value, expected: &str) -> bool {
        shown(value, 100) == expected
    }
}
