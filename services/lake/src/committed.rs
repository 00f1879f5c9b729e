//! What readers see: committed units only.
//!
//! A unit's data files are published before its commit marker (see [`crate::lake`]), and the
//! files of a unit interrupted by a crash stay in place until the partition's next owner
//! recovers it: it deletes them and writes those offsets again, possibly cut into other units.
//! A reader that listed such files would count records that are not in the lake yet (twice,
//! once the offsets are written again) or fail reading a file that recovery deleted after it
//! was listed. So every reader goes through [`CommittedView`]: a data file
//! `<topic>-<partition>-<first>-<last>.parquet` is listed only when its partition's highest
//! commit marker is at or past `last`.
//!
//! One view reads a lake's markers once, before its first listing, and filters every later
//! listing by them: a file it admits was committed before the markers were read, so recovery
//! (which only deletes files past the highest marker) never removes it, and every table read
//! through one view shows the same cut of the lake (a unit spans several tables). DataFusion
//! keeps a session's listings too, so a session sees the lake as of its first query; a new
//! session sees what was committed since. A listing whose prefix names neither a lake's root
//! nor one of its tables (not what Octant's reader does) reads the markers of each file's lake
//! when it meets the file, after the listing began: there a file deleted by a recovery in
//! between fails the read instead of being skipped.
//!
//! On a local lake the old marker of a partition is removed after the new one is created; a
//! directory read racing with that sees at least one of them on Linux and on object stores
//! (strongly consistent listings), which is all the rule needs.

use std::collections::HashMap;
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

pub use crate::layout::MARKERS;
use crate::layout::unit_of;

/// The highest commit marker of every topic partition of one lake.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Commits(HashMap<(String, i32), i64>);

impl Commits {
    /// From marker paths relative to the markers' directory: `<topic>/<partition>/<last>`
    /// (anything else is ignored).
    pub fn from_markers<'a>(paths: impl IntoIterator<Item = &'a str>) -> Commits {
        let mut best: HashMap<(String, i32), i64> = HashMap::new();
        for p in paths {
            let mut it = p.split('/');
            let (Some(topic), Some(partition), Some(last), None) = (it.next(), it.next(), it.next(), it.next()) else { continue };
            let (Ok(partition), Ok(last)) = (partition.parse::<i32>(), last.parse::<i64>()) else { continue };
            let e = best.entry((topic.to_string(), partition)).or_insert(last);
            *e = (*e).max(last);
        }
        Commits(best)
    }

    /// The markers of the local lake at `root`.
    pub fn of_dir(root: &std::path::Path) -> std::io::Result<Commits> {
        let mut paths = Vec::new();
        let markers = root.join(MARKERS);
        // Only `<topic>/<partition>/<marker>` counts: stray files are skipped, not an error.
        for topic in std::fs::read_dir(&markers).into_iter().flatten() {
            let topic = topic?;
            if !topic.file_type()?.is_dir() {
                continue;
            }
            for partition in std::fs::read_dir(topic.path())? {
                let partition = partition?;
                if !partition.file_type()?.is_dir() {
                    continue;
                }
                for marker in std::fs::read_dir(partition.path())? {
                    let marker = marker?;
                    paths.push(format!(
                        "{}/{}/{}",
                        topic.file_name().to_string_lossy(),
                        partition.file_name().to_string_lossy(),
                        marker.file_name().to_string_lossy()
                    ));
                }
            }
        }
        Ok(Commits::from_markers(paths.iter().map(String::as_str)))
    }

    /// The markers under `root` (a lake's prefix) in `store`.
    pub async fn of_store(store: &dyn ObjectStore, root: &ObjPath) -> Result<Commits> {
        let dir = root.clone().join(MARKERS);
        let strip = format!("{}/", dir.as_ref());
        let metas: Vec<ObjectMeta> = store.list(Some(&dir)).try_collect().await?;
        Ok(Commits::from_markers(metas.iter().filter_map(|m| m.location.as_ref().strip_prefix(strip.as_str()))))
    }

    /// Whether a reader may see the file named `name`: a unit's file only once committed;
    /// a file not named like a unit's is not the protocol's to hide.
    pub fn admits(&self, name: &str) -> bool {
        match unit_of(name) {
            None => true,
            Some((topic, partition, _, last)) => self.0.get(&(topic.to_string(), partition)).is_some_and(|&c| c >= last),
        }
    }
}

/// The root of the lake a data file belongs to: its location without
/// `<table>/system_id=…/date=…/<name>`; `None` for a path not shaped so.
fn lake_root(location: &ObjPath) -> Option<ObjPath> {
    let parts: Vec<_> = location.parts().collect();
    let n = parts.len();
    if n < 4 || !parts[n - 3].as_ref().starts_with("system_id=") || !parts[n - 2].as_ref().starts_with("date=") {
        return None;
    }
    Some(ObjPath::from_iter(parts[..n - 4].iter().cloned()))
}

/// The markers a view read, per lake root (module docs: read once, kept).
type Snapshots = Mutex<HashMap<ObjPath, Arc<Commits>>>;

/// An object store whose listings hide uncommitted units' files (module docs). Everything
/// else goes to the wrapped store unchanged.
pub struct CommittedView {
    inner: Arc<dyn ObjectStore>,
    snapshots: Arc<Snapshots>,
}

impl CommittedView {
    pub fn new(inner: Arc<dyn ObjectStore>) -> CommittedView {
        CommittedView { inner, snapshots: Default::default() }
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

/// The markers of the lake at `root`: the view's snapshot, read now if it has none.
async fn commits_of(inner: &Arc<dyn ObjectStore>, snapshots: &Snapshots, root: &ObjPath) -> Result<Arc<Commits>> {
    if let Some(c) = snapshots.lock().expect("not poisoned").get(root) {
        return Ok(c.clone());
    }
    let c = Arc::new(Commits::of_store(inner.as_ref(), root).await?);
    // Two first listings at once may both read; the first kept wins, so every listing of
    // this view uses one snapshot.
    Ok(snapshots.lock().expect("not poisoned").entry(root.clone()).or_insert(c).clone())
}

/// The markers of the lakes a listing under `prefix` can belong to, read before it starts:
/// `prefix` as a lake's root, and as a table of one (`<root>/<table>[/system_id=…[/date=…]]`).
async fn before_listing(
    inner: &Arc<dyn ObjectStore>,
    snapshots: &Snapshots,
    prefix: Option<&ObjPath>,
) -> Result<Vec<(ObjPath, Arc<Commits>)>> {
    let mut known = Vec::new();
    let Some(prefix) = prefix else { return Ok(known) };
    for root in [Some(prefix.clone()), root_of_prefix(prefix)].into_iter().flatten() {
        let c = commits_of(inner, snapshots, &root).await?;
        known.push((root, c));
    }
    Ok(known)
}

/// The lake root a listing under `prefix` would belong to if the prefix is a table's
/// (`<root>/<table>[/system_id=…[/date=…]]`); each file's own root is checked against it.
/// DataFusion lists a table once, under `<root>/<table>` (its partition directories only
/// when its listing cache is off).
fn root_of_prefix(prefix: &ObjPath) -> Option<ObjPath> {
    let parts: Vec<_> = prefix.parts().collect();
    let depth = parts.iter().rev().take_while(|p| p.as_ref().starts_with("system_id=") || p.as_ref().starts_with("date=")).count();
    let table = parts.len().checked_sub(depth + 1)?;
    Some(ObjPath::from_iter(parts[..table].iter().cloned()))
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
        let (inner, snapshots) = (self.inner.clone(), self.snapshots.clone());
        let prefix = prefix.cloned();
        // The markers first (module docs), then the listing, filtered.
        stream::once(async move {
            let known = before_listing(&inner, &snapshots, prefix.as_ref()).await?;
            let listing = inner.list(prefix.as_ref());
            Ok::<_, object_store::Error>(filtered(listing, known, inner, snapshots))
        })
        .try_flatten()
        .boxed()
    }

    async fn list_with_delimiter(&self, prefix: Option<&ObjPath>) -> Result<ListResult> {
        let known = before_listing(&self.inner, &self.snapshots, prefix).await?;
        let mut result = self.inner.list_with_delimiter(prefix).await?;
        let mut kept = Vec::with_capacity(result.objects.len());
        for m in result.objects {
            if admitted(&m, &known, &self.inner, &self.snapshots).await? {
                kept.push(m);
            }
        }
        result.objects = kept;
        Ok(result)
    }

    async fn copy_opts(&self, from: &ObjPath, to: &ObjPath, options: CopyOptions) -> Result<()> {
        self.inner.copy_opts(from, to, options).await
    }
}

/// Whether `m` is listed. `known`: the markers read before the listing; a file of another
/// root is judged by its own lake's (module docs).
async fn admitted(m: &ObjectMeta, known: &[(ObjPath, Arc<Commits>)], inner: &Arc<dyn ObjectStore>, snapshots: &Snapshots) -> Result<bool> {
    let Some(name) = m.location.filename() else { return Ok(true) };
    if unit_of(name).is_none() {
        return Ok(true);
    }
    let Some(root) = lake_root(&m.location) else { return Ok(true) };
    match known.iter().find(|(r, _)| *r == root) {
        Some((_, c)) => Ok(c.admits(name)),
        None => Ok(commits_of(inner, snapshots, &root).await?.admits(name)),
    }
}

fn filtered(
    listing: BoxStream<'static, Result<ObjectMeta>>,
    known: Vec<(ObjPath, Arc<Commits>)>,
    inner: Arc<dyn ObjectStore>,
    snapshots: Arc<Snapshots>,
) -> BoxStream<'static, Result<ObjectMeta>> {
    listing
        .and_then(move |m| {
            let (known, inner, snapshots) = (known.clone(), inner.clone(), snapshots.clone());
            async move { Ok(admitted(&m, &known, &inner, &snapshots).await?.then_some(m)) }
        })
        .try_filter_map(|m| async move { Ok(m) })
        .boxed()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unit_names_parse_from_the_right() {
        assert_eq!(
            unit_of("t1-14-s3lake.octant.observations-1-00000000000000014727-00000000000000015542.parquet"),
            Some(("t1-14-s3lake.octant.observations", 1, 14727, 15542))
        );
        assert_eq!(
            unit_of("octant.observations-0-00000000000000000000-00000000000000000009.parquet"),
            Some(("octant.observations", 0, 0, 9))
        );
        assert_eq!(unit_of("part-0.parquet"), None);
        assert_eq!(unit_of("a-1-2-3.csv"), None);
        assert_eq!(unit_of("-1-2-3.parquet"), None);
    }

    #[test]
    fn a_unit_is_admitted_once_its_partition_is_committed_past_it() {
        let c =
            Commits::from_markers(["t/0/00000000000000000009", "t/0/00000000000000000019", "t/1/00000000000000000004", "junk", "t/x/5"]);
        let name = |p: i32, first: i64, last: i64| crate::lake::file_name("t", p, first, last);
        assert!(c.admits(&name(0, 0, 9)));
        assert!(c.admits(&name(0, 10, 19)), "the highest marker counts");
        assert!(!c.admits(&name(0, 20, 29)), "past the highest marker: not committed");
        assert!(!c.admits(&name(1, 5, 7)));
        assert!(!c.admits(&name(2, 0, 0)), "no marker at all");
        assert!(c.admits("notes.parquet"), "not a unit's file");
    }

    #[test]
    fn roots_from_files_and_prefixes() {
        let f = ObjPath::from("a/lake/observations/system_id=s/date=2025-01-01/t-0-1-2.parquet");
        assert_eq!(lake_root(&f), Some(ObjPath::from("a/lake")));
        assert_eq!(lake_root(&ObjPath::from("a/b/c")), None);
        assert_eq!(root_of_prefix(&ObjPath::from("a/lake/observations")), Some(ObjPath::from("a/lake")));
        assert_eq!(root_of_prefix(&ObjPath::from("a/lake/observations/system_id=s/date=2025-01-01")), Some(ObjPath::from("a/lake")));
    }
}
