//! A fetched zip's listing, checked on the host before anything unpacks it:
//! every member stays inside the folder it is unpacked into (no absolute
//! path, no `..`), none is a link, and together they unpack to at most a
//! given size. Only the central directory is read (ZIP64 included; by the
//! `zip` crate), so a truncated archive, whose directory is at its end, is
//! refused too.

use std::path::Path;

use anyhow::{Result, bail};

/// The members' count and total unpacked size, or why the archive is
/// refused (in words, without the archive's path). The listing is read
/// with the `zip` crate; the sizes are the ones it declares (the sandbox's
/// extraction holds each member to them).
pub fn check(path: &Path, max_bytes: u64) -> Result<(u64, u64)> {
    let file = std::fs::File::open(path)?;
    let mut archive = zip::ZipArchive::new(file).map_err(|e| match e {
        zip::result::ZipError::InvalidArchive(_) | zip::result::ZipError::Io(_) => {
            anyhow::anyhow!("not a zip archive, or a truncated one ({e})")
        }
        other => anyhow::anyhow!("not a zip archive mlrb reads ({other})"),
    })?;
    let mut total = 0u64;
    for index in 0..archive.len() {
        let member = archive
            .by_index_raw(index)
            .map_err(|e| anyhow::anyhow!("truncated: its listing ends early ({e})"))?;
        let name = member.name().to_string();
        member_name(&name)?;
        if member.is_symlink() {
            bail!("its member {name:?} is a link");
        }
        total = total.saturating_add(member.size());
        if total > max_bytes {
            bail!("it unpacks to more than {max_bytes} bytes (MLRB_FETCH_MAX_BYTES)");
        }
    }
    Ok((archive.len() as u64, total))
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

#[cfg(test)]
mod tests {
    use super::*;

    /// End of central directory, and a central directory entry.
    const EOCD: u32 = 0x0605_4b50;
    const ENTRY: u32 = 0x0201_4b50;

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
