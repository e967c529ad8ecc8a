//! Reading a content by its name wherever the store keeps it: a file of
//! its own in `objects/`, or an entry of a pack in `packs/` (see
//! [`super::packs`]). Every reader of snapshot contents goes through here.

use std::collections::HashMap;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};

use crate::record::snapshot::packs::{self, PackEntry};
use crate::record::snapshot::read::is_hash;
use crate::record::walk::{DirHandle, Kind};

/// The contents of one snapshot store, loose and packed.
pub struct ObjectReader {
    objects: DirHandle,
    /// Each trusted pack: its path as records show it, and open file.
    packs: Vec<(String, File)>,
    /// Name → (pack, offset, length).
    index: HashMap<[u8; 32], (usize, u64, u64)>,
    /// Each pack not trusted (or file of `packs/` that is none), with why.
    refused: Vec<String>,
}

impl ObjectReader {
    /// The contents of the snapshot directory `dir` (a store without
    /// `packs/`, from before packs, has loose objects only).
    pub fn open(dir: &Path) -> Result<Self> {
        let objects = dir.join("objects");
        let mut reader = Self {
            objects: DirHandle::open_root(&objects).with_context(|| format!("opening {}", objects.display()))?,
            packs: Vec::new(),
            index: HashMap::new(),
            refused: Vec::new(),
        };
        let Ok(listing) = std::fs::read_dir(dir.join("packs")) else {
            return Ok(reader);
        };
        let mut paths: Vec<PathBuf> = listing.filter_map(|e| e.ok().map(|e| e.path())).collect();
        paths.sort();
        for path in paths {
            reader.add_pack(path);
        }
        Ok(reader)
    }

    /// Takes the pack at `path` if it is to be trusted, else says why not.
    fn add_pack(&mut self, path: PathBuf) {
        let shown = format!(
            "snapshots/packs/{}",
            path.file_name().unwrap_or_default().to_string_lossy()
        );
        let name = path
            .file_name()
            .and_then(|n| n.to_str())
            .and_then(|n| n.strip_suffix(".pack"));
        let Some(name) = name.filter(|n| is_hash(n)) else {
            self.refused.push(format!("{shown}: not a pack"));
            return;
        };
        let entries = crate::record::open_record_file(&path)
            .map_err(|e| format!("{e:#}"))
            .and_then(|file| packs::parse(&file, name).map(|entries| (file, entries)));
        let (file, entries) = match entries {
            Ok(parsed) => parsed,
            Err(why) => return self.refused.push(format!("{shown}: {why}; not trusted")),
        };
        let pack = self.packs.len();
        if let Some(entry) = entries.iter().find(|e| self.index.contains_key(&e.name)) {
            let hex = blake3::Hash::from_bytes(entry.name).to_hex();
            return self
                .refused
                .push(format!("{shown}: lists {hex}, which another pack lists; not trusted"));
        }
        for PackEntry { name, offset, len } in entries {
            self.index.insert(name, (pack, offset, len));
        }
        self.packs.push((shown, file));
    }

    /// Every pack of the store that is not to be trusted, with why.
    pub fn refused(&self) -> &[String] {
        &self.refused
    }

    /// The names of every packed content.
    pub fn packed(&self) -> impl Iterator<Item = &[u8; 32]> {
        self.index.keys()
    }

    /// Whether the store holds the content `name`.
    pub fn contains(&self, name: &str) -> bool {
        let loose = || rustix::fs::statat(&self.objects, name, rustix::fs::AtFlags::SYMLINK_NOFOLLOW);
        self.packed_at(name).is_some() || is_hash(name) && loose().is_ok_and(|s| Kind::of(&s) == Kind::File)
    }

    fn packed_at(&self, name: &str) -> Option<(usize, u64, u64)> {
        let raw = blake3::Hash::from_hex(name).ok()?;
        self.index.get(raw.as_bytes()).copied()
    }

    /// The content `name`, whole, if it is at most `max` bytes; a packed
    /// one is checked against its name.
    pub fn read(&self, name: &str, max: u64) -> Result<Vec<u8>> {
        if !is_hash(name) {
            bail!("`{name}` is not a content's name");
        }
        let Some((pack, offset, len)) = self.packed_at(name) else {
            let (file, stat) = self
                .objects
                .open_file(name.as_bytes())
                .with_context(|| format!("object {name}: missing"))?;
            if stat.st_size as u64 > max {
                bail!("object {name}: larger than {max} bytes");
            }
            let mut bytes = Vec::new();
            std::io::Read::read_to_end(&mut std::io::Read::take(&file, max), &mut bytes)?;
            return Ok(bytes);
        };
        if len > max {
            bail!("object {name}: larger than {max} bytes");
        }
        let (shown, file) = &self.packs[pack];
        let mut bytes = vec![0u8; len as usize];
        file.read_exact_at(&mut bytes, offset)
            .with_context(|| format!("{shown}: cannot read {name}"))?;
        if packs::content_name(&bytes) != name {
            bail!("{shown}: its entry {name} does not hash to its name");
        }
        Ok(bytes)
    }

    /// Puts the content `name` at `file_name` in `dir`: a hard link to its
    /// object unless `copy` (a packed content is always a copy of its own).
    pub fn restore(&self, name: &str, dir: &DirHandle, file_name: &str, executable: bool, copy: bool) -> Result<()> {
        let mode = if executable { 0o755 } else { 0o644 };
        if self.packed_at(name).is_some() {
            let bytes = self.read(name, u64::MAX)?;
            let out = dir.create_file(file_name.as_bytes(), mode)?;
            out.write_all_at(&bytes, 0)?;
            return Ok(());
        }
        if !is_hash(name) {
            bail!("`{name}` is not a content's name");
        }
        if !copy && rustix::fs::linkat(&self.objects, name, dir, file_name, rustix::fs::AtFlags::empty()).is_ok() {
            return Ok(());
        }
        let (source, _) = self.objects.open_file(name.as_bytes())?;
        let out = dir.create_file(file_name.as_bytes(), mode)?;
        // Holes stay holes: a sparse file never becomes its apparent size on disk.
        crate::record::walk::copy_sparse(&source, &out)?;
        Ok(())
    }

    /// Every packed content that does not hash to its name (what verify
    /// reports: a pack changed after it was written).
    pub fn check_packed(&self) -> Vec<String> {
        let mut failures = Vec::new();
        for raw in self.index.keys() {
            let name = blake3::Hash::from_bytes(*raw).to_hex();
            if let Err(why) = self.read(name.as_str(), u64::MAX) {
                failures.push(format!("{why:#}"));
            }
        }
        failures.sort();
        failures
    }
}
