//! The profiler's evidence packages as the web view reads them: from the evidence directory
//! the profiler writes (`<evidence>/<system>/<version>/<source>/<period>/profile.json`, each
//! package replaced whole), never from the profiler's memory. A package's `profile.json` is
//! parsed once and kept until its file changes.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use octant_contracts::Profile;
use octant_report::meta_evaluation::MetaEvaluation;

/// One package: where it is, its record and what the pages show of it.
#[derive(Debug, Clone)]
pub struct Package {
    pub dir: PathBuf,
    pub record: Profile,
    pub meta: Option<MetaEvaluation>,
    /// The whole `profile.json`.
    pub json: Arc<serde_json::Value>,
}

/// A package as read, with its `profile.json`'s modification time then.
type Read = (SystemTime, Arc<Package>);

/// The packages read so far, by `profile.json` path.
#[derive(Default, Clone)]
pub struct Packages {
    read: Arc<Mutex<HashMap<PathBuf, Read>>>,
}

/// The directories of a package tree `depth` levels below `dir` (names starting with `.`,
/// unfinished packages, skipped).
fn dirs(dir: &Path, depth: usize, out: &mut Vec<PathBuf>) {
    if depth == 0 {
        out.push(dir.to_path_buf());
        return;
    }
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    let mut found: Vec<PathBuf> = entries
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.is_dir() && !p.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.starts_with('.')))
        .collect();
    found.sort();
    for d in found {
        dirs(&d, depth - 1, out);
    }
}

impl Packages {
    /// Every package under `root`, or only `system`'s, in path order.
    pub fn list(&self, root: &Path, system: Option<&str>) -> Vec<Arc<Package>> {
        let mut found = Vec::new();
        match system {
            Some(s) => dirs(&root.join(octant_lake::lake::escape(s)), 3, &mut found),
            None => dirs(root, 4, &mut found),
        }
        found.into_iter().filter_map(|d| self.read(&d)).filter(|p| system.is_none_or(|s| p.record.system_id == s)).collect()
    }

    /// The package in `dir`, parsed again only when its `profile.json` changed.
    fn read(&self, dir: &Path) -> Option<Arc<Package>> {
        let file = dir.join("profile.json");
        let modified = std::fs::metadata(&file).and_then(|m| m.modified()).ok()?;
        if let Some((at, p)) = self.read.lock().unwrap().get(&file)
            && *at == modified
        {
            return Some(p.clone());
        }
        let json: serde_json::Value = serde_json::from_slice(&std::fs::read(&file).ok()?).ok()?;
        let record: Profile = serde_json::from_value(json.get("profile")?.clone()).ok()?;
        let meta = json.get("meta_evaluation").and_then(|m| serde_json::from_value(m.clone()).ok());
        let p = Arc::new(Package { dir: dir.to_path_buf(), record, meta, json: Arc::new(json) });
        self.read.lock().unwrap().insert(file, (modified, p.clone()));
        Some(p)
    }
}

/// The `<body>` of an HTML document (the whole text when it has none).
pub fn body(page: &str) -> &str {
    let start = page.find("<body>").map(|i| i + 6).unwrap_or(0);
    let end = page.rfind("</body>").unwrap_or(page.len()).max(start);
    &page[start..end]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bodies_are_cut_from_their_pages() {
        assert_eq!(body("<html><body><p>x</p></body></html>"), "<p>x</p>");
        assert_eq!(body("no body"), "no body");
        assert_eq!(body("</body><body>"), "");
    }
}
