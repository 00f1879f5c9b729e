//! Lake reads behind the pages, kept per page and arguments and dropped when the lake has
//! committed anything since they were read (`octant_lake::reader::commits`: every table's log
//! version; readers see committed files only, so equal versions mean equal rows). A warm page
//! costs reading each table's log past the version the cache last saw (the tables stay open);
//! a cold one opens a session and runs its queries.

use std::any::Any;
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use datafusion::error::{DataFusionError, Result};
use datafusion::prelude::SessionContext;
use octant_lake::reader::LakeState as Commits;

/// Entries kept; the least recently used goes first.
pub const CAPACITY: usize = 512;

struct Entry {
    commits: Commits,
    used: Instant,
    value: Arc<dyn Any + Send + Sync>,
}

/// The cache of one lake.
#[derive(Clone)]
pub struct LakeCache {
    lake: PathBuf,
    storage: octant_lake::StorageOptions,
    entries: Arc<Mutex<HashMap<String, Entry>>>,
    /// The lake's tables, open (each read only past its last version).
    tables: Arc<tokio::sync::OnceCell<octant_lake::Lake>>,
    hits: prometheus::IntCounter,
    misses: prometheus::IntCounter,
}

impl LakeCache {
    pub fn new(lake: PathBuf, storage: octant_lake::StorageOptions, hits: prometheus::IntCounter, misses: prometheus::IntCounter) -> Self {
        LakeCache { lake, storage, entries: Arc::default(), tables: Arc::default(), hits, misses }
    }

    /// The value `load` reads for `key`, from the cache when the lake has committed nothing
    /// since it was read.
    pub async fn get<T, F, Fut>(&self, key: String, load: F) -> Result<Arc<T>>
    where
        T: Send + Sync + 'static,
        F: FnOnce(SessionContext) -> Fut,
        Fut: std::future::Future<Output = Result<T>>,
    {
        let external = |e: std::io::Error| DataFusionError::External(Box::new(e));
        let lake = self
            .tables
            .get_or_try_init(|| async { octant_lake::Lake::open(&self.lake.to_string_lossy(), &self.storage) })
            .await
            .map_err(external)?;
        let commits = octant_lake::reader::commits(lake).await.map_err(external)?;
        {
            let mut entries = self.entries.lock().unwrap();
            if let Some(e) = entries.get_mut(&key)
                && e.commits == commits
                && let Ok(v) = e.value.clone().downcast::<T>()
            {
                e.used = Instant::now();
                self.hits.inc();
                return Ok(v);
            }
        }
        self.misses.inc();
        let ctx = octant_lake::reader::open_with(&self.lake, &self.storage).await?;
        let value = Arc::new(load(ctx).await?);
        let mut entries = self.entries.lock().unwrap();
        if entries.len() >= CAPACITY
            && !entries.contains_key(&key)
            && let Some(oldest) = entries.iter().min_by_key(|(_, e)| e.used).map(|(k, _)| k.clone())
        {
            entries.remove(&oldest);
        }
        entries.insert(key, Entry { commits, used: Instant::now(), value: value.clone() });
        Ok(value)
    }
}
