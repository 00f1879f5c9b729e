//! Where the lake's files go and how they are written, whatever holds them (a directory or an
//! object store): names of units and files, partition values, Parquet settings.
//!
//! ## Layout
//! `<root>/<table>/date=<YYYY-MM-DD>/<topic>-<partition>-<first>-<last>.<tag>.parquet`
//! (offsets zero-padded to 20 digits, so names sort by offset; `tag`: random, so that no two
//! attempts at a unit share a name), and `<root>/<table>/_delta_log/` (the table's Delta log:
//! which files are in the table, [`crate::delta`]). A **unit** is everything one input
//! partition buffered between two flushes, offsets `first..=last`: one file per table and date
//! it touches, whatever the number of systems (rows sorted by system, and by metric where the
//! table has one, so Parquet statistics skip the other systems' row groups).
//!
use arrow::record_batch::RecordBatch;
use parquet::basic::{Compression, ZstdLevel};
use parquet::file::properties::WriterProperties;

/// One file of a unit: its date partition and rows.
pub struct FileSpec {
    pub date: String,
    pub batch: RecordBatch,
}

/// What a unit commits to one table: its files, and the table's version of the unit's input
/// partition the writer last read (the commit is refused if it is no longer that:
/// [`crate::delta::Fenced`]). A table part without files commits the identifier alone.
pub struct TablePart<'a> {
    pub table: &'a str,
    pub expected: Option<i64>,
    pub files: Vec<FileSpec>,
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

/// The directory of commit markers under a lake of the layout before Delta tables (read by
/// `octant lake migrate` only).
pub const MARKERS: &str = "_commits";

/// `<topic>-<partition>-<first>-<last>.<tag>.parquet`.
pub fn file_name(topic: &str, partition: i32, first: i64, last: i64, tag: &str) -> String {
    format!("{topic}-{partition}-{first:020}-{last:020}.{tag}.parquet")
}

/// A random tag for [`file_name`].
pub fn new_tag() -> String {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos()));
    format!("{:016x}", h.finish())
}

/// `(topic, partition, first, last)` of a unit's data file name (the topic as escaped in
/// names; with or without a tag); `None` for any other name.
pub fn unit_of(name: &str) -> Option<(&str, i32, i64, i64)> {
    let mut rest = name.strip_suffix(".parquet")?;
    if let Some((head, tag)) = rest.rsplit_once('.')
        && !tag.is_empty()
        && tag.bytes().all(|b| b.is_ascii_hexdigit())
        && head.rsplit_once('-').is_some_and(|(_, last)| last.len() == 20 && last.bytes().all(|b| b.is_ascii_digit()))
    {
        rest = head;
    }
    let mut parts = rest.rsplitn(4, '-');
    let last = parts.next()?.parse().ok()?;
    let first = parts.next()?.parse().ok()?;
    let partition = parts.next()?.parse().ok()?;
    let topic = parts.next().filter(|t| !t.is_empty())?;
    Some((topic, partition, first, last))
}

/// Columns a responder looks one value up by (the run page by `run_id`, the alert page by
/// `fingerprint`): each row group of every file carries a Parquet bloom filter of them, so a
/// lookup reads a file's footer and filters and skips the row groups that cannot hold the value
/// instead of scanning the column across the whole lake. A file of a table without the column
/// has no filter. Sized by the writer (folded to the values a row group holds, 5 % false
/// positives): a few KiB per row group of the lake's sizes.
pub const LOOKUP_COLUMNS: [&str; 2] = ["run_id", "fingerprint"];

/// `batch` as the bytes of one Parquet file written with `props`.
pub fn parquet_bytes(batch: &RecordBatch, props: &WriterProperties) -> std::io::Result<Vec<u8>> {
    let mut w = parquet::arrow::ArrowWriter::try_new(Vec::new(), batch.schema(), Some(props.clone())).map_err(std::io::Error::other)?;
    w.write(batch).map_err(std::io::Error::other)?;
    w.into_inner().map_err(std::io::Error::other)
}

/// Parquet settings of the lake: zstd, and bloom filters of the [`LOOKUP_COLUMNS`].
pub fn writer_properties() -> WriterProperties {
    LOOKUP_COLUMNS
        .iter()
        .fold(WriterProperties::builder().set_compression(Compression::ZSTD(ZstdLevel::default())), |b, c| {
            b.set_column_bloom_filter_enabled(parquet::schema::types::ColumnPath::from(*c), true)
        })
        .build()
}
