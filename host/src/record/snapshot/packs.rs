//! The pack file: many small contents in one file, so that a step that
//! writes 200,000 small files adds one file to the store, not 200,000.
//!
//! `snapshots/packs/<name>.pack` holds the contents one after another, then
//! the index (per content: its name, offset and length, 48 bytes), then a
//! footer: the data's length, the number of entries, the blake3 of the
//! index and those two counts, and a magic. The pack is named by that
//! blake3. It is written once, whole, under a temporary name, synced, and
//! only then renamed to its name, so a pack under its name is never half
//! written; it is never changed afterwards. A reader trusts a pack only
//! when its name, footer, index and length agree (a truncated or torn
//! file is refused), every entry lies inside the data, no two overlap and
//! no name is listed twice ([`parse`]); each content is checked against
//! its name when read.

use std::collections::HashSet;
use std::fs::File;
use std::io::Write;
use std::os::unix::fs::FileExt;
use std::path::Path;

use crate::record::extents::ContentHasher;

/// The last 8 bytes of every pack.
const MAGIC: &[u8; 8] = b"MLRBPAK1";
/// Data length, entry count, checksum, magic.
const FOOTER: u64 = 8 + 8 + 32 + 8;
/// Name, offset, length.
const ENTRY: u64 = 32 + 8 + 8;

/// Where a content lies in its pack's data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PackEntry {
    /// The content's name (as [`content_name`] gives it), as bytes.
    pub name: [u8; 32],
    /// Its offset in the pack.
    pub offset: u64,
    /// Its length.
    pub len: u64,
}

/// The name of a whole content held in memory, as snapshots name contents
/// (see [`crate::record::extents`]).
pub fn content_name(bytes: &[u8]) -> String {
    let mut hasher = ContentHasher::new();
    hasher.update(0, bytes);
    hasher.finish(bytes.len() as u64)
}

/// The index and footer that follow `data_len` bytes of data holding
/// `entries`, and the pack's name. Nothing is checked: what the writer
/// passes is right by construction (and tests build hostile packs here).
pub fn encode_tail(data_len: u64, entries: &[PackEntry]) -> (Vec<u8>, String) {
    let mut tail = Vec::with_capacity(entries.len() * ENTRY as usize + FOOTER as usize);
    for entry in entries {
        tail.extend_from_slice(&entry.name);
        tail.extend_from_slice(&entry.offset.to_le_bytes());
        tail.extend_from_slice(&entry.len.to_le_bytes());
    }
    tail.extend_from_slice(&data_len.to_le_bytes());
    tail.extend_from_slice(&(entries.len() as u64).to_le_bytes());
    let checksum = blake3::hash(&tail);
    tail.extend_from_slice(checksum.as_bytes());
    tail.extend_from_slice(MAGIC);
    (tail, checksum.to_hex().to_string())
}

/// Writes a pack of `data` holding `entries` into the folder `packs`
/// through the temporary `tmp`, synced before it takes its name; the
/// pack's name (without `.pack`) and the bytes of its index.
pub fn write(packs: &Path, tmp: &Path, data: &[u8], entries: &[PackEntry]) -> std::io::Result<(String, u64)> {
    use std::os::unix::fs::OpenOptionsExt;
    let (tail, name) = encode_tail(data.len() as u64, entries);
    let path = packs.join(format!("{name}.pack"));
    if path.exists() {
        return Ok((name, 0));
    }
    let written = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o444)
        .open(tmp)
        .and_then(|mut out| {
            out.write_all(data)?;
            out.write_all(&tail)?;
            out.sync_data()
        });
    match written.and_then(|()| std::fs::rename(tmp, &path)) {
        Ok(()) => Ok((name, tail.len() as u64)),
        Err(e) => {
            let _ = std::fs::remove_file(tmp);
            Err(e)
        }
    }
}

/// The entries of the pack `file` named `name`, in the order of their
/// offsets; or why it is not to be trusted.
pub fn parse(file: &File, name: &str) -> Result<Vec<PackEntry>, String> {
    let size = file.metadata().map_err(|e| format!("cannot read: {e}"))?.len();
    let mut footer = [0u8; FOOTER as usize];
    if size < FOOTER {
        return Err("truncated: shorter than a pack's footer".into());
    }
    file.read_exact_at(&mut footer, size - FOOTER)
        .map_err(|e| format!("cannot read: {e}"))?;
    if &footer[48..] != MAGIC {
        return Err("truncated or not a pack: no pack footer at its end".into());
    }
    let word = |at: usize| u64::from_le_bytes(footer[at..at + 8].try_into().unwrap_or_default());
    let (data_len, count) = (word(0), word(8));
    let index_len = count.checked_mul(ENTRY).filter(|len| *len <= size);
    let expected = index_len.and_then(|len| len.checked_add(data_len)?.checked_add(FOOTER));
    let Some(index_len) = index_len.filter(|_| expected == Some(size)) else {
        return Err(format!(
            "truncated or malformed: {size} bytes, its footer says {data_len} of data and {count} entries"
        ));
    };
    let mut index = vec![0u8; (index_len + 16) as usize];
    file.read_exact_at(&mut index, data_len)
        .map_err(|e| format!("cannot read: {e}"))?;
    let checksum = blake3::hash(&index);
    if checksum.as_bytes() != &footer[16..48] {
        return Err("its index does not match its checksum (torn or changed)".into());
    }
    if checksum.to_hex().as_str() != name {
        return Err("its name is not its index's checksum".into());
    }
    entries(&index[..index_len as usize], data_len)
}

/// The entries of `index`, checked against a data part of `data_len` bytes.
fn entries(index: &[u8], data_len: u64) -> Result<Vec<PackEntry>, String> {
    let mut entries: Vec<PackEntry> = index
        .chunks_exact(ENTRY as usize)
        .map(|raw| PackEntry {
            name: raw[..32].try_into().unwrap_or_default(),
            offset: u64::from_le_bytes(raw[32..40].try_into().unwrap_or_default()),
            len: u64::from_le_bytes(raw[40..48].try_into().unwrap_or_default()),
        })
        .collect();
    entries.sort_by_key(|e| (e.offset, e.len));
    let mut names = HashSet::with_capacity(entries.len());
    let mut end = 0u64;
    for entry in &entries {
        let hex = blake3::Hash::from_bytes(entry.name).to_hex();
        let Some(entry_end) = entry.offset.checked_add(entry.len).filter(|e| *e <= data_len) else {
            return Err(format!("its index puts {hex} outside its data"));
        };
        if entry.offset < end {
            return Err(format!("its index has {hex} overlap another entry"));
        }
        if !names.insert(entry.name) {
            return Err(format!("its index lists {hex} twice"));
        }
        end = entry_end;
    }
    Ok(entries)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn name(bytes: &[u8]) -> [u8; 32] {
        *blake3::Hash::from_hex(content_name(bytes)).unwrap().as_bytes()
    }

    /// A pack of `data` with `entries`, written as is (hostile or not).
    fn raw(dir: &Path, data: &[u8], entries: &[PackEntry]) -> (File, String) {
        let (tail, pack) = encode_tail(data.len() as u64, entries);
        let path = dir.join(format!("{pack}.pack"));
        std::fs::write(&path, [data, &tail].concat()).unwrap();
        (File::open(path).unwrap(), pack)
    }

    #[test]
    fn a_pack_reads_back_and_hostile_indexes_are_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let entry = |bytes: &[u8], offset, len| PackEntry {
            name: name(bytes),
            offset,
            len,
        };
        let good = [entry(b"one", 0, 3), entry(b"two", 3, 3)];
        let (file, pack) = raw(tmp.path(), b"onetwo", &good);
        assert_eq!(parse(&file, &pack).unwrap(), good);
        assert!(parse(&file, "0".repeat(64).as_str()).unwrap_err().contains("name"));
        let refused = |entries: &[PackEntry]| {
            let (file, pack) = raw(tmp.path(), b"onetwo", entries);
            parse(&file, &pack).unwrap_err()
        };
        assert!(refused(&[entry(b"one", 4, 3)]).contains("outside"));
        assert!(refused(&[entry(b"one", u64::MAX, 3)]).contains("outside"));
        assert!(refused(&[entry(b"one", 0, 3), entry(b"two", 2, 3)]).contains("overlap"));
        let twice = [
            entry(b"one", 0, 3),
            PackEntry {
                offset: 3,
                ..entry(b"one", 0, 3)
            },
        ];
        assert!(refused(&twice).contains("twice"));
        // Cut anywhere, a pack is refused.
        let whole = std::fs::read(tmp.path().join(format!("{pack}.pack"))).unwrap();
        for cut in [1, 8, 40, whole.len() - 3] {
            let path = tmp.path().join("cut");
            std::fs::write(&path, &whole[..whole.len() - cut]).unwrap();
            let why = parse(&File::open(&path).unwrap(), &pack).unwrap_err();
            assert!(why.contains("truncated"), "{cut}: {why}");
        }
    }
}
