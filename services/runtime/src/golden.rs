//! Golden files of a stage: `<dir>/inputs/<name>.json` (a JSON array of input records) and
//! `<dir>/expected/<name>.json` (what the stage must produce from them). Used by the stages'
//! in-process tests and by the integration tests that run the same files through the broker.

use std::path::Path;

use serde::de::DeserializeOwned;

/// Every `<dir>/inputs/*.json`, by file stem, sorted. Panics (a test helper) when the
/// directory holds fewer than two or a file does not parse as `Vec<T>`.
pub fn inputs<T: DeserializeOwned>(dir: &Path) -> Vec<(String, Vec<T>)> {
    let inputs = dir.join("inputs");
    let mut files: Vec<_> = std::fs::read_dir(&inputs)
        .unwrap_or_else(|e| panic!("golden inputs {}: {e}", inputs.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    files.sort();
    assert!(files.len() >= 2, "golden inputs present in {}", inputs.display());
    files
        .iter()
        .map(|f| {
            let text = std::fs::read_to_string(f).unwrap();
            let parsed = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", f.display()));
            (f.file_stem().unwrap().to_string_lossy().to_string(), parsed)
        })
        .collect()
}
