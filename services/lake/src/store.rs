//! The lake on an object store (`s3://bucket/prefix`, `memory://`, `file://`), for the lake
//! writer and every reader. The same layout and commit protocol as the local lake
//! ([`crate::lake`]), with create-only semantics from the store: every data file and marker is
//! written with `PutMode::Create` (S3: `If-None-Match: *`), so an existing object is never
//! overwritten. Objects appear whole or not at all, so no temporary names are needed.

use std::collections::BTreeMap;
use std::fmt;
use std::io;
use std::sync::Arc;

use futures::TryStreamExt;
use object_store::path::Path as ObjPath;
use object_store::{ObjectStore, ObjectStoreExt, PutMode, PutOptions, PutPayload};
use parquet::arrow::ArrowWriter;
use parquet::file::properties::WriterProperties;
use serde::{Deserialize, Serialize};
use url::Url;

use crate::layout::{FileSpec, escape, file_name, parse_name};

/// Options of the object store (`aws_endpoint`, `aws_region`, `aws_access_key_id`,
/// `aws_secret_access_key`, `aws_allow_http`, …; the `AWS_*` environment variables are read
/// too). Values of secret-looking keys never appear in `Debug` output or logs.
#[derive(Clone, Default, PartialEq, Serialize)]
#[serde(transparent)]
pub struct StorageOptions(pub BTreeMap<String, String>);

impl<'de> Deserialize<'de> for StorageOptions {
    /// Values may be strings, booleans or numbers (`aws_allow_http = true`, or the same from
    /// an environment override); the store takes them as strings.
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let m = BTreeMap::<String, serde_json::Value>::deserialize(d)?;
        m.into_iter()
            .map(|(k, v)| match v {
                serde_json::Value::String(s) => Ok((k, s)),
                serde_json::Value::Bool(b) => Ok((k, b.to_string())),
                serde_json::Value::Number(n) => Ok((k, n.to_string())),
                other => Err(serde::de::Error::custom(format!("storage option {k}: {other} is not a string, boolean or number"))),
            })
            .collect::<Result<_, _>>()
            .map(StorageOptions)
    }
}

impl fmt::Debug for StorageOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut m = f.debug_map();
        for (k, v) in &self.0 {
            let shown = if octant_contracts::secrets::is_secret_key(k)
                || k.to_ascii_lowercase().contains("key") && !k.to_ascii_lowercase().ends_with("key_id")
            {
                "[redacted]"
            } else {
                v.as_str()
            };
            m.entry(k, &shown);
        }
        m.finish()
    }
}

/// True when `location` names an object store rather than a local directory.
pub fn is_url(location: &str) -> bool {
    location.contains("://")
}

/// A store and the prefix of the lake in it.
#[derive(Clone)]
pub struct ObjectLake {
    pub url: Url,
    pub store: Arc<dyn ObjectStore>,
    pub prefix: ObjPath,
}

impl fmt::Debug for ObjectLake {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ObjectLake({})", self.url)
    }
}

fn err(e: impl std::error::Error + Send + Sync + 'static) -> io::Error {
    io::Error::other(e)
}

/// Runs an object-store future from synchronous code on a multi-threaded runtime.
fn block_on<F: std::future::Future>(f: F) -> F::Output {
    tokio::task::block_in_place(|| tokio::runtime::Handle::current().block_on(f))
}

impl ObjectLake {
    /// Opens the store named by `url`. On S3, create-only puts use `If-None-Match` (set
    /// `aws_conditional_put` to change it).
    pub fn open(url: &str, options: &StorageOptions) -> io::Result<ObjectLake> {
        let url = Url::parse(url).map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, format!("{url}: {e}")))?;
        let (store, prefix): (Arc<dyn ObjectStore>, ObjPath) = match url.scheme() {
            "s3" | "s3a" => {
                let mut b = object_store::aws::AmazonS3Builder::from_env().with_url(url.as_str());
                let mut opts = options.0.clone();
                opts.entry("aws_conditional_put".into()).or_insert_with(|| "etag".into());
                for (k, v) in opts {
                    let key = k
                        .to_ascii_lowercase()
                        .parse()
                        .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, format!("storage option {k}: {e}")))?;
                    b = b.with_config(key, v);
                }
                (Arc::new(b.build().map_err(err)?), ObjPath::parse(url.path()).map_err(err)?)
            }
            _ => {
                let (s, p) = object_store::parse_url_opts(&url, options.0.iter()).map_err(err)?;
                (Arc::from(s), p)
            }
        };
        Ok(ObjectLake { url, store, prefix })
    }

    pub(crate) fn path(&self, parts: &[&str]) -> ObjPath {
        let mut p = self.prefix.clone();
        for part in parts {
            p = p.clone().join(*part);
        }
        p
    }

    fn markers(&self, topic: &str, partition: i32) -> ObjPath {
        self.path(&[crate::layout::MARKERS, &escape(topic), &partition.to_string()])
    }

    async fn list(&self, prefix: &ObjPath) -> io::Result<Vec<ObjPath>> {
        let metas: Vec<_> = self.store.list(Some(prefix)).try_collect().await.map_err(err)?;
        Ok(metas.into_iter().map(|m| m.location).collect())
    }

    /// Every object of the lake (relative path, size) under `table/`, for readers.
    pub async fn list_table(&self, table: &str) -> io::Result<Vec<(String, u64)>> {
        let base = self.path(&[table]);
        let metas: Vec<_> = self.store.list(Some(&base)).try_collect().await.map_err(err)?;
        let strip = format!("{}/", self.prefix.as_ref());
        Ok(metas
            .into_iter()
            .map(|m| {
                let s = m.location.as_ref();
                (s.strip_prefix(strip.as_str()).unwrap_or(s).to_string(), m.size)
            })
            .collect())
    }

    pub fn committed(&self, topic: &str, partition: i32) -> io::Result<Option<i64>> {
        let dir = self.markers(topic, partition);
        block_on(async { Ok(self.list(&dir).await?.iter().filter_map(|p| p.filename().and_then(|n| n.parse::<i64>().ok())).max()) })
    }

    pub fn recover(&self, topic: &str, partition: i32) -> io::Result<Option<i64>> {
        let committed = self.committed(topic, partition)?;
        let esc = escape(topic);
        block_on(async {
            for p in self.list(&self.prefix).await? {
                if p.as_ref().contains("/_commits/") || p.as_ref().starts_with("_commits/") {
                    continue;
                }
                let Some(name) = p.filename() else { continue };
                if parse_name(name, &esc, partition).is_some_and(|(first, _)| committed.is_none_or(|c| first > c)) {
                    tracing::warn!(object = %p, "removing an object of an interrupted unit");
                    self.store.delete(&p).await.map_err(err)?;
                }
            }
            Ok(committed)
        })
    }

    pub fn write_unit(
        &self,
        topic: &str,
        partition: i32,
        first: i64,
        last: i64,
        files: Vec<FileSpec<'_>>,
        props: &WriterProperties,
    ) -> io::Result<Vec<String>> {
        let name = file_name(&escape(topic), partition, first, last);
        let mut staged = Vec::new();
        for f in files {
            let mut w = ArrowWriter::try_new(Vec::new(), f.batch.schema(), Some(props.clone())).map_err(io::Error::other)?;
            w.write(&f.batch).map_err(io::Error::other)?;
            let bytes = w.into_inner().map_err(io::Error::other)?;
            let path = self.path(&[f.table, &format!("system_id={}", escape(f.system)), &format!("date={}", f.date), &name]);
            staged.push((path, bytes));
        }
        let create = || PutOptions { mode: PutMode::Create, ..Default::default() };
        block_on(async {
            let mut written = Vec::new();
            for (path, bytes) in staged {
                self.store.put_opts(&path, PutPayload::from(bytes), create()).await.map_err(err)?;
                written.push(path.to_string());
            }
            let markers = self.markers(topic, partition);
            self.store.put_opts(&markers.clone().join(format!("{last:020}")), PutPayload::default(), create()).await.map_err(err)?;
            for p in self.list(&markers).await? {
                if p.filename().and_then(|n| n.parse::<i64>().ok()).is_some_and(|o| o < last) {
                    let _ = self.store.delete(&p).await;
                }
            }
            Ok(written)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{Int64Array, RecordBatch};

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_commit_protocol_on_an_object_store() {
        let lake = ObjectLake::open("memory:///lake", &StorageOptions::default()).unwrap();
        let batch = RecordBatch::try_from_iter([("x", Arc::new(Int64Array::from_iter_values(0..5)) as _)]).unwrap();
        let p = crate::lake::writer_properties();
        assert_eq!(lake.recover("octant.obs", 0).unwrap(), None);
        let spec = |b: &RecordBatch| vec![FileSpec { table: "t", system: "a", date: "2026-11-30", batch: b.clone() }];
        lake.write_unit("octant.obs", 0, 0, 4, spec(&batch), &p).unwrap();
        assert_eq!(lake.committed("octant.obs", 0).unwrap(), Some(4));
        // An interrupted unit: its object exists, its marker does not.
        block_on(lake.store.put(
            &lake.path(&["t", "system_id=b", "date=2026-11-30", &file_name("octant.obs", 0, 5, 9)]),
            PutPayload::from_static(b"partial"),
        ))
        .unwrap();
        assert_eq!(lake.recover("octant.obs", 0).unwrap(), Some(4));
        let objects = block_on(lake.list_table("t")).unwrap();
        assert_eq!(objects.len(), 1, "{objects:?}");
        assert!(objects[0].0.starts_with("t/system_id=a/date=2026-11-30/octant.obs-0-"));
        // Create-only: the same unit again is refused, never overwritten.
        assert!(lake.write_unit("octant.obs", 0, 0, 4, spec(&batch), &p).is_err());
        assert!(
            format!("{:?}", StorageOptions([("aws_secret_access_key".to_string(), "s3cr3t".to_string())].into())).contains("[redacted]")
        );
        let o: StorageOptions =
            toml::from_str("aws_allow_http = true\naws_region = \"eu-west-1\"\naws_secret_access_key = \"s3cr3t\"\n").unwrap();
        assert_eq!(o.0["aws_allow_http"], "true");
        let shown = format!("{o:?}");
        assert!(shown.contains("eu-west-1") && !shown.contains("s3cr3t"), "{shown}");
    }
}
