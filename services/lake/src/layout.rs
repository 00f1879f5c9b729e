//! Where the lake's files go and how they are written, whatever holds them (a directory or an
//! object store): names of units, files and markers, partition values, Parquet settings.
//!
//! ## Layout
//! `<root>/<table>/system_id=<id>/date=<YYYY-MM-DD>/<topic>-<partition>-<first>-<last>.parquet`
//! (offsets zero-padded to 20 digits, so names sort by offset). A **unit** is everything one
//! input partition buffered between two flushes, offsets `first..=last`; its files share that
//! name in every directory they go to.
//!

use arrow::record_batch::RecordBatch;
use parquet::basic::{Compression, ZstdLevel};
use parquet::file::properties::WriterProperties;

/// One file of a unit: the table, the partition values, the rows.
pub struct FileSpec<'a> {
    pub table: &'a str,
    pub system: &'a str,
    pub date: &'a str,
    pub batch: RecordBatch,
}

/// Escapes a partition value the way Hive does (`/`, `=`, `%` and other specials → `%XX`).
pub fn escape(v: &str) -> String {
    let mut out = String::new();
    for c in v.chars() {
        if c.is_ascii_alphanumeric() || "._-:@+".contains(c) {
            out.push(c);
        } else {
            for b in c.to_string().bytes() {
                out.push_str(&format!("%{b:02X}"));
            }
        }
    }
    match out.as_str() {
        "" => crate::schema::NO_SYSTEM.to_string(),
        "." | ".." => out.bytes().map(|b| format!("%{b:02X}")).collect(),
        _ => out,
    }
}

/// The directory of commit markers under a lake's root.
pub const MARKERS: &str = "_commits";

/// `<topic>-<partition>-<first>-<last>.parquet`.
pub fn file_name(topic: &str, partition: i32, first: i64, last: i64) -> String {
    format!("{topic}-{partition}-{first:020}-{last:020}.parquet")
}

/// `(topic, partition, first, last)` of a unit's data file name (the topic as escaped in
/// names); `None` for any other name.
pub fn unit_of(name: &str) -> Option<(&str, i32, i64, i64)> {
    let rest = name.strip_suffix(".parquet")?;
    let mut parts = rest.rsplitn(4, '-');
    let last = parts.next()?.parse().ok()?;
    let first = parts.next()?.parse().ok()?;
    let partition = parts.next()?.parse().ok()?;
    let topic = parts.next().filter(|t| !t.is_empty())?;
    Some((topic, partition, first, last))
}

/// (first, last) of a data file of `topic`/`partition`, from its name.
pub(crate) fn parse_name(name: &str, topic: &str, partition: i32) -> Option<(i64, i64)> {
    unit_of(name).filter(|&(t, p, _, _)| t == topic && p == partition).map(|(_, _, first, last)| (first, last))
}

/// Columns a responder looks one value up by (the run page by `run_id`, the alert page by
/// `fingerprint`): each row group of every file carries a Parquet bloom filter of them, so a
/// lookup reads a file's footer and filters and skips the row groups that cannot hold the value
/// instead of scanning the column across the whole lake. A file of a table without the column
/// has no filter. Sized by the writer (folded to the values a row group holds, 5 % false
/// positives): a few KiB per row group of the lake's sizes.
pub const LOOKUP_COLUMNS: [&str; 2] = ["run_id", "fingerprint"];

/// Parquet settings of the lake: zstd, and bloom filters of the [`LOOKUP_COLUMNS`].
pub fn writer_properties() -> WriterProperties {
    LOOKUP_COLUMNS
        .iter()
        .fold(WriterProperties::builder().set_compression(Compression::ZSTD(ZstdLevel::default())), |b, c| {
            b.set_column_bloom_filter_enabled(parquet::schema::types::ColumnPath::from(*c), true)
        })
        .build()
}
