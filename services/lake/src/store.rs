//! Where a lake is: a local directory or an object store (`s3://bucket/prefix`, `memory://`,
//! `file://`), opened the same way for the lake writer and every reader, and the storage
//! options (credentials never shown). Data files are written with `PutMode::Create` (S3:
//! `If-None-Match: *`), so an existing object is never overwritten; the tables' logs are
//! delta-rs's ([`crate::delta`]).

use std::collections::BTreeMap;
use std::fmt;
use std::io;
use std::sync::Arc;

use object_store::ObjectStore;
use object_store::path::Path as ObjPath;
use serde::{Deserialize, Serialize};
use url::Url;

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

/// Runs `f` to completion from synchronous code: in place on a multi-threaded runtime's worker,
/// on a runtime of its own elsewhere (no runtime; a current-thread runtime, from a scoped
/// thread, which that runtime cannot block).
pub fn block_on<F>(f: F) -> F::Output
where
    F: std::future::Future + Send,
    F::Output: Send,
{
    let own = || tokio::runtime::Builder::new_current_thread().enable_all().build().expect("a runtime");
    match tokio::runtime::Handle::try_current() {
        Ok(h) if h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread => tokio::task::block_in_place(|| h.block_on(f)),
        Ok(_) => std::thread::scope(|s| s.spawn(|| own().block_on(f)).join().expect("the lake call did not panic")),
        Err(_) => own().block_on(f),
    }
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

    /// A local directory as a lake: the filesystem's store, the directory's absolute path.
    pub fn local(root: &std::path::Path) -> io::Result<ObjectLake> {
        let root = std::path::absolute(root)?;
        let url = Url::from_directory_path(&root).map_err(|()| io::Error::other(format!("{} is not a directory path", root.display())))?;
        let prefix = ObjPath::from_absolute_path(&root).map_err(err)?;
        Ok(ObjectLake { url, store: Arc::new(object_store::local::LocalFileSystem::new()), prefix })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn storage_options_never_show_credentials() {
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
