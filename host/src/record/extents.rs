//! A file's content read without its holes, and named as snapshot objects
//! are: an 8 GiB sparse file costs what its data does, never 8 GiB of
//! zeros read and hashed.
//!
//! The name of a content: it is cut into blocks of [`BLOCK`] bytes (the
//! last may be shorter), each all zeros or data. A content without a zero
//! block is named by its plain blake3 (as every snapshot before this
//! scheme was). Any other is named by blake3 in derive-key mode, a domain
//! of its own (no content can pose as another across the two), over its
//! size and each run of data blocks: offset, length and the run's plain
//! blake3. Zero blocks are named by their absence, so a hole is never
//! hashed, and the name depends on the bytes only, not on which zeros
//! the filesystem keeps as holes.

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;

/// The unit of zeros that is skipped rather than hashed (and left a hole in
/// a stored object): the page size, and the block size of common filesystems.
pub const BLOCK: u64 = 4096;

/// The bytes read at once.
const PIECE: u64 = 1 << 20;

/// The derive-key context of names of contents with zero blocks.
const SPARSE_CONTEXT: &str = "mlrb 2025-06 snapshot content with zero blocks v1";

static ZEROS: [u8; BLOCK as usize] = [0; BLOCK as usize];

/// Whether `bytes` (at most one block) are all zeros (a `memcmp`: fast
/// whatever the optimisation level).
fn is_zero(bytes: &[u8]) -> bool {
    bytes == &ZEROS[..bytes.len()]
}

/// The ranges of `file` below `size` that may hold data, as SEEK_DATA and
/// SEEK_HOLE report them, widened to multiples of `align` (never past
/// `size`) and merged. Where the filesystem cannot say, all of it.
pub fn data_ranges(file: &File, size: u64, align: u64) -> Vec<(u64, u64)> {
    use rustix::fs::SeekFrom;
    let mut ranges: Vec<(u64, u64)> = Vec::new();
    let mut offset = 0u64;
    while offset < size {
        let data = match rustix::fs::seek(file, SeekFrom::Data(offset)) {
            Ok(data) => data,
            // Nothing but a hole past `offset`.
            Err(rustix::io::Errno::NXIO) => break,
            // No SEEK_DATA here: the rest is data.
            Err(_) => offset,
        };
        if data >= size {
            break;
        }
        let hole = rustix::fs::seek(file, SeekFrom::Hole(data)).unwrap_or(size).min(size);
        let (start, end) = (
            data / align * align,
            hole.div_ceil(align).saturating_mul(align).min(size),
        );
        match ranges.last_mut() {
            Some(last) if start <= last.1 => last.1 = last.1.max(end),
            _ if end > start => ranges.push((start, end)),
            _ => {}
        }
        offset = hole.max(data + 1);
    }
    ranges
}

/// Reads the first `size` bytes of `file`, holes skipped: `sink` gets each
/// piece that may hold data with its offset, in order, each starting on a
/// block boundary and a whole number of blocks long but for the file's
/// last. The page cache is told to drop what was read, so a large file
/// does not stay resident. Returns how many bytes the content has: `size`,
/// or less where the file shrank meanwhile.
pub fn read_data(file: &File, size: u64, mut sink: impl FnMut(u64, &[u8]) -> io::Result<()>) -> io::Result<u64> {
    // A file of one piece is read whole: its holes cost less than asking.
    let small = size <= PIECE;
    let ranges = if small {
        vec![(0, size)]
    } else {
        data_ranges(file, size, BLOCK)
    };
    let mut buf = vec![0u8; size.min(PIECE) as usize];
    for (start, end) in ranges {
        let mut offset = start;
        while offset < end {
            let want = (end - offset).min(PIECE) as usize;
            let got = read_full(file, &mut buf[..want], offset)?;
            if got > 0 {
                sink(offset, &buf[..got])?;
            }
            if got > 0 && !small {
                let _ = rustix::fs::fadvise(
                    file,
                    offset,
                    std::num::NonZeroU64::new(got as u64),
                    rustix::fs::Advice::DontNeed,
                );
            }
            if got < want {
                return Ok(offset + got as u64);
            }
            offset += got as u64;
        }
    }
    Ok(size)
}

/// Fills `buf` from `offset` unless the file ends first; the bytes read.
fn read_full(file: &File, buf: &mut [u8], offset: u64) -> io::Result<usize> {
    let mut got = 0;
    while got < buf.len() {
        match file.read_at(&mut buf[got..], offset + got as u64) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(got)
}

/// Computes the name of a content from its data pieces (see the module's
/// documentation); what lies between two pieces is zeros.
pub struct ContentHasher {
    /// The offset up to which the content has been seen.
    seen: u64,
    /// The data run in progress: its start and hasher.
    run: Option<(u64, blake3::Hasher)>,
    /// Finished data runs: offset, length, plain blake3.
    runs: Vec<(u64, u64, [u8; 32])>,
    /// Whether a zero block was met.
    zeros: bool,
}

impl Default for ContentHasher {
    fn default() -> Self {
        Self::new()
    }
}

impl ContentHasher {
    /// A hasher that has seen nothing.
    pub fn new() -> Self {
        Self {
            seen: 0,
            run: None,
            runs: Vec::new(),
            zeros: false,
        }
    }

    /// Takes the piece `bytes` at `offset` (a block boundary at or past
    /// what was seen; a whole number of blocks unless it ends the content).
    /// Returns the runs of data blocks in it, as ranges of `bytes`: what a
    /// copy must write, the rest being zeros.
    pub fn update(&mut self, offset: u64, bytes: &[u8]) -> Vec<std::ops::Range<usize>> {
        debug_assert!(offset.is_multiple_of(BLOCK) && offset >= self.seen);
        if offset > self.seen {
            self.end_run();
            self.zeros = true;
        }
        let mut data = Vec::new();
        let mut from: Option<usize> = None;
        for (i, block) in bytes.chunks(BLOCK as usize).enumerate() {
            let at = i * BLOCK as usize;
            match (is_zero(block), from) {
                (true, Some(start)) => {
                    self.extend_run(offset + start as u64, &bytes[start..at]);
                    self.end_run();
                    data.push(start..at);
                    from = None;
                    self.zeros = true;
                }
                (true, None) => self.zeros = true,
                (false, None) => from = Some(at),
                (false, Some(_)) => {}
            }
        }
        if let Some(start) = from {
            self.extend_run(offset + start as u64, &bytes[start..]);
            data.push(start..bytes.len());
        }
        self.seen = offset + bytes.len() as u64;
        data
    }

    /// Adds data blocks at `offset` to the run in progress (a new one if
    /// none is, or the last ended before `offset`).
    fn extend_run(&mut self, offset: u64, bytes: &[u8]) {
        if self
            .run
            .as_ref()
            .is_some_and(|(start, hasher)| start + hasher.count() != offset)
        {
            self.end_run();
        }
        let (_, hasher) = self.run.get_or_insert_with(|| (offset, blake3::Hasher::new()));
        hasher.update(bytes);
    }

    fn end_run(&mut self) {
        if let Some((start, hasher)) = self.run.take() {
            self.runs.push((start, hasher.count(), *hasher.finalize().as_bytes()));
        }
    }

    /// The name of a content of `size` bytes whose data was all given.
    pub fn finish(mut self, size: u64) -> String {
        if size > self.seen {
            self.zeros = true;
        }
        self.end_run();
        if !self.zeros {
            return match self.runs.as_slice() {
                [(0, len, hash)] if *len == size => blake3::Hash::from_bytes(*hash).to_hex().to_string(),
                _ => blake3::hash(b"").to_hex().to_string(),
            };
        }
        let mut hasher = blake3::Hasher::new_derive_key(SPARSE_CONTEXT);
        hasher.update(&size.to_le_bytes());
        for (offset, len, hash) in &self.runs {
            hasher.update(&offset.to_le_bytes());
            hasher.update(&len.to_le_bytes());
            hasher.update(hash);
        }
        hasher.finalize().to_hex().to_string()
    }
}

/// The name of `file`'s content (its first `size` bytes), holes unread.
pub fn content_hash(file: &File, size: u64) -> io::Result<String> {
    let mut hasher = ContentHasher::new();
    let read = read_data(file, size, |offset, bytes| {
        hasher.update(offset, bytes);
        Ok(())
    })?;
    Ok(hasher.finish(read))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn name_of(bytes: &[u8]) -> String {
        let mut hasher = ContentHasher::new();
        hasher.update(0, bytes);
        hasher.finish(bytes.len() as u64)
    }

    #[test]
    fn a_content_without_zero_blocks_keeps_its_plain_blake3() {
        for bytes in [&b""[..], b"x", &[7u8; 3 * BLOCK as usize + 5]] {
            assert_eq!(name_of(bytes), blake3::hash(bytes).to_hex().to_string());
        }
        // A few zeros are not a zero block.
        let mut mixed = vec![1u8; 2 * BLOCK as usize];
        mixed[10..4000].fill(0);
        assert_eq!(name_of(&mixed), blake3::hash(&mixed).to_hex().to_string());
    }

    #[test]
    fn the_name_depends_on_the_bytes_not_on_where_the_holes_are() {
        let tmp = tempfile::tempdir().unwrap();
        let mut content = vec![0u8; 64 * BLOCK as usize];
        content[5 * BLOCK as usize..7 * BLOCK as usize].fill(3);
        content[40 * BLOCK as usize + 17] = 9;
        let dense = tmp.path().join("dense");
        std::fs::write(&dense, &content).unwrap();
        let sparse = File::create(tmp.path().join("sparse")).unwrap();
        sparse.set_len(content.len() as u64).unwrap();
        sparse
            .write_all_at(&content[5 * BLOCK as usize..7 * BLOCK as usize], 5 * BLOCK)
            .unwrap();
        sparse.write_all_at(&[9], 40 * BLOCK + 17).unwrap();
        let size = content.len() as u64;
        let a = content_hash(&File::open(&dense).unwrap(), size).unwrap();
        let b = content_hash(&File::open(tmp.path().join("sparse")).unwrap(), size).unwrap();
        assert_eq!(a, b);
        assert_eq!(a, name_of(&content));
        assert_ne!(a, blake3::hash(&content).to_hex().to_string(), "a domain of its own");
        // One byte more, anywhere, is another name; so is another size.
        let mut other = content.clone();
        other[63 * BLOCK as usize] = 1;
        assert_ne!(name_of(&other), a);
        assert_ne!(name_of(&content[..content.len() - 1]), a);
        // A run of data moved by a block is another name.
        let mut moved = vec![0u8; content.len()];
        moved[6 * BLOCK as usize..8 * BLOCK as usize].fill(3);
        moved[40 * BLOCK as usize + 17] = 9;
        assert_ne!(name_of(&moved), a);
    }

    #[test]
    fn pieces_split_anywhere_on_block_boundaries_give_one_name() {
        let mut content = vec![0u8; 20 * BLOCK as usize + 123];
        for (i, b) in content.iter_mut().enumerate() {
            if (i / BLOCK as usize) % 3 != 1 {
                *b = (i % 251) as u8;
            }
        }
        let whole = name_of(&content);
        for cut in [1u64, 2, 7, 19] {
            let mut hasher = ContentHasher::new();
            let at = (cut * BLOCK) as usize;
            hasher.update(0, &content[..at]);
            hasher.update(at as u64, &content[at..]);
            assert_eq!(hasher.finish(content.len() as u64), whole, "cut at block {cut}");
        }
    }

    #[test]
    fn holes_are_not_read() {
        let tmp = tempfile::tempdir().unwrap();
        let file = File::create(tmp.path().join("f")).unwrap();
        file.set_len(1 << 40).unwrap();
        file.write_all_at(b"data", 1 << 39).unwrap();
        let file = File::open(tmp.path().join("f")).unwrap();
        let mut read = 0u64;
        let size = read_data(&file, 1 << 40, |_, bytes| {
            read += bytes.len() as u64;
            Ok(())
        })
        .unwrap();
        assert_eq!(size, 1 << 40);
        assert!(read <= 1 << 20, "{read} bytes read of a file with 4 bytes of data");
    }
}
