//! The lake: a local directory or an object store ([`crate::store`]), and on a local
//! filesystem how a unit of files becomes durable atomically and what a restart finds (where
//! files go: [`crate::layout`]).
//!
//! ## Commit protocol (exactly once)
//! 1. each file of the unit is written as `.<name>.tmp` in its directory and fsynced;
//! 2. each is published with create-only semantics (`link` then `unlink` of the temporary:
//!    an existing name is an error, never overwritten) and its directory fsynced;
//! 3. the unit's **marker** `<root>/_commits/<topic>/<partition>/<last>` is created and its
//!    directory fsynced; only then are Kafka offsets committed (to `last + 1`).
//!
//! On assignment, [`Lake::recover`] takes the highest marker M as the last offset in the lake,
//! deletes files of that partition whose first offset is above M (a unit interrupted between
//! 2 and 3) and temporaries, and the writer skips every input offset ≤ M. A crash at any point
//! therefore leaves each record in the lake exactly once after the restart.

use std::fs::{self, File};
use std::io;
use std::path::{Path, PathBuf};

use parquet::arrow::ArrowWriter;
use parquet::file::properties::WriterProperties;

pub(crate) use crate::layout::parse_name;
pub use crate::layout::{FileSpec, LOOKUP_COLUMNS, MARKERS, escape, file_name, unit_of, writer_properties};

/// Where the lake is: a local directory, or an object store.
#[derive(Debug, Clone)]
pub enum Lake {
    Local(LocalLake),
    Object(crate::store::ObjectLake),
}

/// The lake in a local directory.
#[derive(Debug, Clone)]
pub struct LocalLake {
    pub root: PathBuf,
}

impl Lake {
    /// A local directory.
    pub fn new(root: impl Into<PathBuf>) -> Lake {
        Lake::Local(LocalLake::new(root))
    }

    /// A directory, or an object-store URL (`s3://bucket/prefix`, `memory://`, `file://`).
    pub fn open(location: &str, options: &crate::store::StorageOptions) -> io::Result<Lake> {
        if crate::store::is_url(location) {
            Ok(Lake::Object(crate::store::ObjectLake::open(location, options)?))
        } else {
            Ok(Lake::new(location))
        }
    }

    pub fn location(&self) -> String {
        match self {
            Lake::Local(l) => l.root.display().to_string(),
            Lake::Object(o) => o.url.to_string(),
        }
    }

    /// The last offset of `topic`/`partition` in the lake (highest marker).
    pub fn committed(&self, topic: &str, partition: i32) -> io::Result<Option<i64>> {
        match self {
            Lake::Local(l) => l.committed(topic, partition),
            Lake::Object(o) => o.committed(topic, partition),
        }
    }

    /// Makes the lake consistent for `topic`/`partition` after a crash; returns the last
    /// offset in the lake.
    pub fn recover(&self, topic: &str, partition: i32) -> io::Result<Option<i64>> {
        match self {
            Lake::Local(l) => l.recover(topic, partition),
            Lake::Object(o) => o.recover(topic, partition),
        }
    }

    /// Writes one unit (all its files, then its marker). Returns what was written.
    pub fn write_unit(
        &self,
        topic: &str,
        partition: i32,
        first: i64,
        last: i64,
        files: Vec<FileSpec<'_>>,
        props: &WriterProperties,
    ) -> io::Result<Vec<String>> {
        match self {
            Lake::Local(l) => {
                Ok(l.write_unit(topic, partition, first, last, files, props)?.iter().map(|p| p.display().to_string()).collect())
            }
            Lake::Object(o) => o.write_unit(topic, partition, first, last, files, props),
        }
    }
}

fn fsync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

impl LocalLake {
    pub fn new(root: impl Into<PathBuf>) -> LocalLake {
        LocalLake { root: root.into() }
    }

    fn markers(&self, topic: &str, partition: i32) -> PathBuf {
        self.root.join(MARKERS).join(escape(topic)).join(partition.to_string())
    }

    /// The last offset of `topic`/`partition` in the lake (highest marker).
    pub fn committed(&self, topic: &str, partition: i32) -> io::Result<Option<i64>> {
        let dir = self.markers(topic, partition);
        let mut best = None;
        match fs::read_dir(&dir) {
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e),
            Ok(entries) => {
                for e in entries {
                    if let Some(o) = e?.file_name().to_str().and_then(|n| n.parse::<i64>().ok()) {
                        best = best.max(Some(o));
                    }
                }
            }
        }
        Ok(best)
    }

    /// Every data directory of the lake (`<table>/system_id=…/date=…`).
    fn data_dirs(&self) -> io::Result<Vec<PathBuf>> {
        let mut out = Vec::new();
        let Ok(tables) = fs::read_dir(&self.root) else { return Ok(out) };
        for t in tables {
            let t = t?.path();
            if !t.is_dir() || t.file_name().is_some_and(|n| n.to_string_lossy().starts_with('_')) {
                continue;
            }
            for s in fs::read_dir(&t)? {
                let s = s?.path();
                if !s.is_dir() {
                    continue;
                }
                for d in fs::read_dir(&s)? {
                    let d = d?.path();
                    if d.is_dir() {
                        out.push(d);
                    }
                }
            }
        }
        Ok(out)
    }

    /// Makes the lake consistent for `topic`/`partition` after a crash; returns the last offset
    /// in the lake.
    pub fn recover(&self, topic: &str, partition: i32) -> io::Result<Option<i64>> {
        let committed = self.committed(topic, partition)?;
        let esc = escape(topic);
        for dir in self.data_dirs()? {
            for e in fs::read_dir(&dir)? {
                let e = e?;
                let name = e.file_name().to_string_lossy().to_string();
                let tmp = name.starts_with(&format!(".{esc}-{partition}-")) && name.ends_with(".tmp");
                let partial = parse_name(&name, &esc, partition).is_some_and(|(first, _)| committed.is_none_or(|c| first > c));
                if tmp || partial {
                    tracing::warn!(file = %e.path().display(), "removing a file of an interrupted unit");
                    fs::remove_file(e.path())?;
                }
            }
        }
        Ok(committed)
    }

    /// Writes one unit (all its files, then its marker). Returns the paths written.
    pub fn write_unit(
        &self,
        topic: &str,
        partition: i32,
        first: i64,
        last: i64,
        files: Vec<FileSpec<'_>>,
        props: &WriterProperties,
    ) -> io::Result<Vec<PathBuf>> {
        let name = file_name(&escape(topic), partition, first, last);
        let mut staged = Vec::new();
        for f in files {
            let dir = self.root.join(f.table).join(format!("system_id={}", escape(f.system))).join(format!("date={}", f.date));
            fs::create_dir_all(&dir)?;
            let tmp = dir.join(format!(".{name}.tmp"));
            let file = File::create(&tmp)?;
            let mut w = ArrowWriter::try_new(file, f.batch.schema(), Some(props.clone())).map_err(io::Error::other)?;
            w.write(&f.batch).map_err(io::Error::other)?;
            let file = w.into_inner().map_err(io::Error::other)?;
            file.sync_all()?;
            staged.push((dir, tmp));
        }
        let mut written = Vec::new();
        for (dir, tmp) in staged {
            let dest = dir.join(&name);
            // Create-only: never replaces an existing file.
            fs::hard_link(&tmp, &dest)?;
            fs::remove_file(&tmp)?;
            fsync_dir(&dir)?;
            written.push(dest);
        }
        let markers = self.markers(topic, partition);
        fs::create_dir_all(&markers)?;
        File::create(markers.join(format!("{last:020}")))?.sync_all()?;
        fsync_dir(&markers)?;
        // Older markers are redundant.
        for e in fs::read_dir(&markers)? {
            let e = e?;
            if e.file_name().to_str().and_then(|n| n.parse::<i64>().ok()).is_some_and(|o| o < last) {
                let _ = fs::remove_file(e.path());
            }
        }
        Ok(written)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::Int64Array;
    use arrow::record_batch::RecordBatch;
    use std::sync::Arc;

    fn batch(n: i64) -> RecordBatch {
        RecordBatch::try_from_iter([("x", Arc::new(Int64Array::from_iter_values(0..n)) as _)]).unwrap()
    }

    #[test]
    fn a_unit_interrupted_before_its_marker_is_removed_on_recovery() {
        let root = std::env::temp_dir().join(format!("octant-lake-unit-{}", std::process::id()));
        let _ = fs::remove_dir_all(&root);
        let lake = LocalLake::new(&root);
        let p = writer_properties();
        assert_eq!(lake.recover("octant.obs", 0).unwrap(), None);
        lake.write_unit("octant.obs", 0, 0, 9, vec![FileSpec { table: "t", system: "a/b", date: "2026-11-30", batch: batch(10) }], &p)
            .unwrap();
        assert_eq!(lake.committed("octant.obs", 0).unwrap(), Some(9));
        assert!(root.join("t/system_id=a%2Fb/date=2026-11-30").join(file_name("octant.obs", 0, 0, 9)).exists());
        // A later unit whose files were published but whose marker was not (a crash).
        let dir = root.join("t/system_id=c/date=2026-11-30");
        fs::create_dir_all(&dir).unwrap();
        fs::write(dir.join(file_name("octant.obs", 0, 10, 20)), b"partial").unwrap();
        fs::write(dir.join(format!(".{}.tmp", file_name("octant.obs", 0, 21, 30))), b"tmp").unwrap();
        fs::write(dir.join(file_name("octant.obs", 1, 10, 20)), b"another partition").unwrap();
        assert_eq!(lake.recover("octant.obs", 0).unwrap(), Some(9));
        let left: Vec<String> = fs::read_dir(&dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().to_string()).collect();
        assert_eq!(left, vec![file_name("octant.obs", 1, 10, 20)], "only the other partition's file stays");
        // Publishing is create-only.
        fs::create_dir_all(root.join("t/system_id=d/date=2026-11-30")).unwrap();
        fs::write(root.join("t/system_id=d/date=2026-11-30").join(file_name("octant.obs", 0, 10, 20)), b"x").unwrap();
        assert!(
            lake.write_unit("octant.obs", 0, 10, 20, vec![FileSpec { table: "t", system: "d", date: "2026-11-30", batch: batch(3) }], &p)
                .is_err()
        );
        let _ = fs::remove_dir_all(&root);
    }

    #[test]
    fn partition_values_are_escaped() {
        assert_eq!(escape("agent-a"), "agent-a");
        assert_eq!(escape("a/b=c d"), "a%2Fb%3Dc%20d");
        assert_eq!(escape(".."), "%2E%2E");
        assert_eq!(escape(""), crate::schema::NO_SYSTEM);
    }
}
