//! A fetched zip's listing, checked on the host before anything unpacks it:
//! every member stays inside the folder it is unpacked into (no absolute
//! path, no `..`), none is a link, and together they unpack to at most a
//! given size. Only the central directory is read (ZIP64 included), so a
//! truncated archive, whose directory is at its end, is refused too.

use std::io::{Read, Seek, SeekFrom};
use std::path::Path;

use anyhow::{Result, bail};

/// End of central directory, and its ZIP64 locator and record.
const EOCD: u32 = 0x0605_4b50;
const ZIP64_LOCATOR: u32 = 0x0706_4b50;
const ZIP64_EOCD: u32 = 0x0606_4b50;
/// A central directory entry.
const ENTRY: u32 = 0x0201_4b50;
/// The most a central directory may take (a million members is ~100 MB).
const MAX_DIRECTORY: u64 = 1 << 30;

fn u16_at(b: &[u8], at: usize) -> u64 {
    b.get(at..at + 2).map_or(0, |s| u16::from_le_bytes([s[0], s[1]]) as u64)
}

fn u32_at(b: &[u8], at: usize) -> u64 {
    b.get(at..at + 4)
        .map_or(0, |s| u32::from_le_bytes(s.try_into().unwrap_or_default()) as u64)
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    b.get(at..at + 8)
        .map_or(0, |s| u64::from_le_bytes(s.try_into().unwrap_or_default()))
}

/// The members' count and total unpacked size, or why the archive is
/// refused (in words, without the archive's path).
pub fn check(path: &Path, max_bytes: u64) -> Result<(u64, u64)> {
    let mut file = std::fs::File::open(path)?;
    let (offset, size) = directory(&mut file)?;
    if size > MAX_DIRECTORY {
        bail!("its listing takes {size} bytes, more than mlrb reads");
    }
    let mut listing = vec![0u8; size as usize];
    file.seek(SeekFrom::Start(offset))?;
    file.read_exact(&mut listing)
        .map_err(|_| anyhow::anyhow!("truncated: its listing ends early"))?;
    let (mut at, mut count, mut total) = (0usize, 0u64, 0u64);
    while at < listing.len() {
        let entry = &listing[at..];
        if u32_at(entry, 0) != ENTRY as u64 || entry.len() < 46 {
            bail!("not a zip archive: its listing is damaged");
        }
        let (name_len, extra_len, comment_len) = (u16_at(entry, 28), u16_at(entry, 30), u16_at(entry, 32));
        let name_end = 46 + name_len as usize;
        let extra_end = name_end + extra_len as usize;
        let Some(name) = entry.get(46..name_end) else {
            bail!("not a zip archive: its listing is damaged");
        };
        let name = String::from_utf8_lossy(name);
        member_name(&name)?;
        let unix = u16_at(entry, 4) >> 8 == 3;
        if unix && (u32_at(entry, 38) >> 16) & 0o170000 == 0o120000 {
            bail!("its member {name:?} is a link");
        }
        let mut unpacked = u32_at(entry, 24);
        if unpacked == 0xFFFF_FFFF {
            unpacked = zip64_size(entry.get(name_end..extra_end).unwrap_or_default());
        }
        total = total.saturating_add(unpacked);
        if total > max_bytes {
            bail!("it unpacks to more than {max_bytes} bytes (MLRB_FETCH_MAX_BYTES)");
        }
        count += 1;
        at += extra_end + comment_len as usize;
    }
    Ok((count, total))
}

/// Refuses a member name that would land outside the folder.
fn member_name(name: &str) -> Result<()> {
    let parts: Vec<&str> = name.split(['/', '\\']).collect();
    let drive = name.as_bytes().get(1) == Some(&b':');
    if name.is_empty() || name.starts_with(['/', '\\']) || drive || name.contains('\0') || parts.contains(&"..") {
        bail!("its member {name:?} would be written outside the folder");
    }
    Ok(())
}

/// The ZIP64 extra field's unpacked size (its first value: the size is
/// the first of the fields the entry left at 0xFFFFFFFF).
fn zip64_size(mut extra: &[u8]) -> u64 {
    while extra.len() >= 4 {
        let (id, len) = (u16_at(extra, 0), u16_at(extra, 2) as usize);
        if id == 1 {
            return u64_at(extra, 4);
        }
        extra = extra.get(4 + len..).unwrap_or_default();
    }
    u64::MAX
}

/// Where the central directory starts and how long it is.
fn directory(file: &mut std::fs::File) -> Result<(u64, u64)> {
    let length = file.metadata()?.len();
    let tail_len = length.min(22 + 65535);
    let mut tail = vec![0u8; tail_len as usize];
    file.seek(SeekFrom::Start(length - tail_len))?;
    file.read_exact(&mut tail)?;
    let Some(eocd) = (0..tail.len().saturating_sub(21))
        .rev()
        .find(|&i| u32_at(&tail, i) == EOCD as u64)
    else {
        bail!("not a zip archive, or a truncated one (no end of its listing)");
    };
    let eocd_at = length - tail_len + eocd as u64;
    let (mut size, mut offset) = (u32_at(&tail, eocd + 12), u32_at(&tail, eocd + 16));
    if offset == 0xFFFF_FFFF || size == 0xFFFF_FFFF {
        // ZIP64: its locator sits just before the end record.
        let locator = eocd
            .checked_sub(20)
            .filter(|&l| u32_at(&tail, l) == ZIP64_LOCATOR as u64);
        let Some(locator) = locator else {
            bail!("not a zip archive: its ZIP64 listing is missing");
        };
        let record_at = u64_at(&tail, locator + 8);
        let mut record = [0u8; 56];
        file.seek(SeekFrom::Start(record_at))?;
        file.read_exact(&mut record)
            .map_err(|_| anyhow::anyhow!("truncated: its ZIP64 listing is missing"))?;
        if u32_at(&record, 0) != ZIP64_EOCD as u64 {
            bail!("not a zip archive: its ZIP64 listing is damaged");
        }
        (size, offset) = (u64_at(&record, 40), u64_at(&record, 48));
    }
    if offset.checked_add(size).is_none_or(|end| end > eocd_at) {
        bail!("truncated: its listing points past its end");
    }
    Ok((offset, size))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A zip of `members` (name, Unix mode, stored content), as `zip` writes one.
    fn zip(members: &[(&str, u32, &[u8])]) -> Vec<u8> {
        let (mut body, mut listing) = (Vec::new(), Vec::new());
        for (name, mode, data) in members {
            let offset = body.len() as u32;
            let crc = 0u32;
            body.extend(0x0403_4b50u32.to_le_bytes());
            body.extend([20, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
            body.extend(crc.to_le_bytes());
            body.extend((data.len() as u32).to_le_bytes());
            body.extend((data.len() as u32).to_le_bytes());
            body.extend((name.len() as u16).to_le_bytes());
            body.extend(0u16.to_le_bytes());
            body.extend(name.as_bytes());
            body.extend(*data);
            listing.extend(ENTRY.to_le_bytes());
            listing.extend([20, 3, 20, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
            listing.extend(crc.to_le_bytes());
            listing.extend((data.len() as u32).to_le_bytes());
            listing.extend((data.len() as u32).to_le_bytes());
            listing.extend((name.len() as u16).to_le_bytes());
            listing.extend([0u8; 8]);
            listing.extend((mode << 16).to_le_bytes());
            listing.extend(offset.to_le_bytes());
            listing.extend(name.as_bytes());
        }
        let (at, n) = (body.len() as u32, members.len() as u16);
        let mut out = body;
        out.extend(&listing);
        out.extend(EOCD.to_le_bytes());
        out.extend([0u8; 4]);
        out.extend(n.to_le_bytes());
        out.extend(n.to_le_bytes());
        out.extend((listing.len() as u32).to_le_bytes());
        out.extend(at.to_le_bytes());
        out.extend([0u8; 2]);
        out
    }

    fn checked(bytes: &[u8], max: u64) -> Result<(u64, u64)> {
        let tmp = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(tmp.path(), bytes).unwrap();
        check(tmp.path(), max)
    }

    #[test]
    fn a_plain_archive_is_listed() {
        let good = zip(&[
            ("train.csv", 0o100644, b"a,b\n1,2\n"),
            ("sub/test.csv", 0o100644, b"a\n"),
        ]);
        assert_eq!(checked(&good, 1000).unwrap(), (2, 10));
    }

    #[test]
    fn hostile_archives_are_refused_with_a_reason() {
        let cases: [(Vec<u8>, &str); 7] = [
            (zip(&[("../evil.csv", 0o100644, b"x")]), "outside"),
            (zip(&[("ok/../../evil", 0o100644, b"x")]), "outside"),
            (zip(&[("/etc/passwd", 0o100644, b"x")]), "outside"),
            (zip(&[("link", 0o120777, b"/etc/passwd")]), "is a link"),
            (zip(&[("big.csv", 0o100644, &[0u8; 200])]), "more than 100 bytes"),
            (b"<html>Please sign in</html>".to_vec(), "not a zip"),
            (
                zip(&[("train.csv", 0o100644, b"a,b\n")])[..30].to_vec(),
                "not a zip archive, or a truncated one",
            ),
        ];
        for (bytes, says) in cases {
            let error = format!("{:#}", checked(&bytes, 100).unwrap_err());
            assert!(error.contains(says), "{error:?} does not say {says:?}");
            assert!(!error.contains('\n'));
        }
    }

    #[test]
    fn a_listing_pointing_past_the_end_is_truncated() {
        let mut bytes = zip(&[("train.csv", 0o100644, b"a,b\n")]);
        let n = bytes.len();
        // The directory's offset, moved beyond the end record.
        bytes[n - 6..n - 2].copy_from_slice(&(n as u32).to_le_bytes());
        assert!(format!("{:#}", checked(&bytes, 100).unwrap_err()).contains("truncated"));
    }
}
