//! What Octant's reader sees: the files each table's Delta log lists, and nothing else.
//!
//! Data files are written before their commit, and files of a unit a crash interrupted (or a
//! refused writer's) stay until VACUUM deletes them; files that compaction or erasure removed
//! from a table stay until then too. The reader lists a table's directory with DataFusion
//! (partition pruning by `date`, Parquet statistics and bloom filters), so every listing goes
//! through [`CommittedView`]: a store wrapper that shows, under a table's directory, only the
//! files of the table's snapshot, and hides its log.
//!
//! One view reads each table's snapshot once, at the table's first listing, and filters every
//! later listing by it: every table read through one view shows one version of that table,
//! and a file it admits stays until VACUUM, which keeps files younger than the retention
//! (hours; a query takes seconds). DataFusion keeps a session's listings too, so a session
//! sees each table as of its first query; a new session sees what was committed since.
//! Across tables, a view reads each table's newest version when it first lists it: tables
//! are committed one after another (the home table last, [`crate::lake`]), so a table read
//! later can hold rows of units a table read earlier did not show yet, never fewer.

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::ops::Range;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use bytes::Bytes;
use futures::stream::{self, BoxStream, StreamExt, TryStreamExt};
use object_store::path::Path as ObjPath;
use object_store::{
    CopyOptions, GetOptions, GetResult, ListResult, MultipartUpload, ObjectMeta, ObjectStore, PutMultipartOptions, PutOptions, PutPayload,
    PutResult, Result,
};
use url::Url;

use crate::delta::Tables;

/// `(lake root, table)` of a location under a table's directory: `<root>/<table>/date=…/<file>`
/// or `<root>/<table>/_delta_log/…`; `None` for anything else.
fn table_of(location: &ObjPath) -> Option<(ObjPath, String)> {
    let parts: Vec<_> = location.parts().collect();
    let n = parts.len();
    let at =
        |i: usize| -> Option<(ObjPath, String)> { Some((ObjPath::from_iter(parts[..i].iter().cloned()), parts[i].as_ref().to_string())) };
    if n >= 3 && parts[n - 2].as_ref().starts_with("date=") {
        return at(n - 3);
    }
    let log = parts.iter().position(|p| p.as_ref() == "_delta_log")?;
    at(log.checked_sub(1)?)
}

/// Each table's files as the view first read them.
type Snapshots = Mutex<HashMap<(ObjPath, String), Arc<HashSet<ObjPath>>>>;

/// An object store whose listings show only the files of each table's Delta snapshot (module
/// docs). Everything else goes to the wrapped store unchanged.
pub struct CommittedView {
    inner: Arc<dyn ObjectStore>,
    /// The URL of the store's root (`file:///`, `s3://bucket/`, `memory:///`).
    base: Url,
    snapshots: Arc<Snapshots>,
}

impl CommittedView {
    pub fn new(inner: Arc<dyn ObjectStore>, base: Url) -> CommittedView {
        CommittedView { inner, base, snapshots: Default::default() }
    }

    /// Sets the files of `table` under `root` this view shows (a snapshot its user read
    /// already), instead of reading the log at the table's first listing.
    pub fn with_files(&self, root: ObjPath, table: &str, files: HashSet<ObjPath>) {
        self.snapshots.lock().expect("not poisoned").entry((root, table.to_string())).or_insert(Arc::new(files));
    }
}

impl fmt::Debug for CommittedView {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "CommittedView({})", self.inner)
    }
}

impl fmt::Display for CommittedView {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "CommittedView({})", self.inner)
    }
}

/// The files of `table` under `root`: the view's snapshot, read now if it has none.
async fn files_of(
    inner: &Arc<dyn ObjectStore>,
    base: &Url,
    snapshots: &Snapshots,
    root: &ObjPath,
    table: &str,
) -> Result<Arc<HashSet<ObjPath>>> {
    let key = (root.clone(), table.to_string());
    if let Some(c) = snapshots.lock().expect("not poisoned").get(&key) {
        return Ok(c.clone());
    }
    let url = base.join(&format!("{}/", root.as_ref())).map_err(|e| object_store::Error::Generic { store: "lake", source: Box::new(e) })?;
    let tables = Tables::new(url, inner.clone(), root.clone());
    let files = Arc::new(tables.file_set(table).await.map_err(|e| object_store::Error::Generic { store: "lake", source: Box::new(e) })?);
    // Two first listings at once may both read; the first kept wins, so every listing of
    // this view uses one snapshot.
    Ok(snapshots.lock().expect("not poisoned").entry(key).or_insert(files).clone())
}

#[async_trait]
impl ObjectStore for CommittedView {
    async fn put_opts(&self, location: &ObjPath, payload: PutPayload, opts: PutOptions) -> Result<PutResult> {
        self.inner.put_opts(location, payload, opts).await
    }

    async fn put_multipart_opts(&self, location: &ObjPath, opts: PutMultipartOptions) -> Result<Box<dyn MultipartUpload>> {
        self.inner.put_multipart_opts(location, opts).await
    }

    async fn get_opts(&self, location: &ObjPath, options: GetOptions) -> Result<GetResult> {
        self.inner.get_opts(location, options).await
    }

    /// The wrapped store's own (a local file is opened once for all of a file's ranges).
    async fn get_ranges(&self, location: &ObjPath, ranges: &[Range<u64>]) -> Result<Vec<Bytes>> {
        self.inner.get_ranges(location, ranges).await
    }

    fn delete_stream(&self, locations: BoxStream<'static, Result<ObjPath>>) -> BoxStream<'static, Result<ObjPath>> {
        self.inner.delete_stream(locations)
    }

    fn list(&self, prefix: Option<&ObjPath>) -> BoxStream<'static, Result<ObjectMeta>> {
        let (inner, base, snapshots) = (self.inner.clone(), self.base.clone(), self.snapshots.clone());
        // A table's snapshot is read before its listing (module docs): the listing of a
        // table's directory starts by reading it.
        let prefix = prefix.cloned();
        stream::once(async move {
            let under = |p: &ObjPath| match p.filename() {
                Some(last) if last.starts_with("date=") => table_of(&p.clone().join("f")),
                _ => table_of(&p.clone().join("date=x").join("f")),
            };
            if let Some((root, table)) = prefix.as_ref().and_then(under) {
                files_of(&inner, &base, &snapshots, &root, &table).await?;
            }
            let listing = inner.list(prefix.as_ref());
            Ok::<_, object_store::Error>(
                listing
                    .and_then(move |m| {
                        let (inner, base, snapshots) = (inner.clone(), base.clone(), snapshots.clone());
                        async move { Ok(admitted(&m, &inner, &base, &snapshots).await?.then_some(m)) }
                    })
                    .try_filter_map(|m| async move { Ok(m) })
                    .boxed(),
            )
        })
        .try_flatten()
        .boxed()
    }

    async fn list_with_delimiter(&self, prefix: Option<&ObjPath>) -> Result<ListResult> {
        let mut result = self.inner.list_with_delimiter(prefix).await?;
        let mut kept = Vec::with_capacity(result.objects.len());
        for m in result.objects {
            if admitted(&m, &self.inner, &self.base, &self.snapshots).await? {
                kept.push(m);
            }
        }
        result.objects = kept;
        result.common_prefixes.retain(|p| p.filename() != Some("_delta_log"));
        Ok(result)
    }

    async fn copy_opts(&self, from: &ObjPath, to: &ObjPath, options: CopyOptions) -> Result<()> {
        self.inner.copy_opts(from, to, options).await
    }
}

/// Whether `m` is listed: a file under a table's directory only if the table's snapshot has
/// it (never its log); anything else is not the lake's to hide.
async fn admitted(m: &ObjectMeta, inner: &Arc<dyn ObjectStore>, base: &Url, snapshots: &Snapshots) -> Result<bool> {
    let Some((root, table)) = table_of(&m.location) else { return Ok(true) };
    if m.location.parts().any(|p| p.as_ref() == "_delta_log") {
        return Ok(false);
    }
    Ok(files_of(inner, base, snapshots, &root, &table).await?.contains(&m.location))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tables_from_locations() {
        let f = ObjPath::from("a/lake/observations/date=2025-01-01/t-0-1-2.x.parquet");
        assert_eq!(table_of(&f), Some((ObjPath::from("a/lake"), "observations".to_string())));
        let log = ObjPath::from("a/lake/observations/_delta_log/00000000000000000000.json");
        assert_eq!(table_of(&log), Some((ObjPath::from("a/lake"), "observations".to_string())));
        assert_eq!(table_of(&ObjPath::from("a/b/c")), None);
    }
}
