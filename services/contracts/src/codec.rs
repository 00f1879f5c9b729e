//! Codecs for every contract: Avro binary (raw datum), Avro single-object encoding, the
//! Confluent framing, and JSON with the schema's field names.
//!
//! Decoding looks at the first bytes:
//! - `C3 01` + 8-byte CRC-64-AVRO fingerprint: single-object encoding. The fingerprint picks
//!   the writer schema among every schema ever released (embedded from `schemas/`), and the
//!   datum is resolved to the current schema of the requested type. Fingerprints follow the
//!   specification ([`crate::canonical`]), so any implementation's records resolve here and
//!   Octant's resolve there. The fingerprints Octant wrote before (the apache-avro crate's
//!   non-standard canonical form) are still accepted, as *legacy*, and counted
//!   ([`Decoder::on_legacy`]): see "Fingerprint deprecation" below.
//! - `00` + 4-byte big-endian schema id: Confluent framing. Ids map to schemas through a
//!   declared table ([`Decoder::with_confluent_id`]); an unknown id is an error of class
//!   `unknown_schema`, never a guess.
//! - `{` (after white space): JSON.
//!
//!
//! A decoder declared for plain Avro binary of one schema ([`Decoder::with_plain_binary`])
//! reads every payload as a datum with no header at all: such a topic carries only that
//! encoding (a plain datum's first byte can be anything).
//!
//! Every failure is a [`DecodeError`] with a stable [`DecodeError::class`], for dead letters.
//!
//! ## Fingerprint deprecation
//! Octant releases up to 0.1 wrote single-object headers with non-standard fingerprints.
//! Readers accept both kinds through the whole 0.x series (removal not before 2027-06-30);
//! every service counts the legacy records it reads
//! (`octant_contracts_legacy_fingerprint_records_total{service}`), so operators see when the
//! last old producer is gone. Upgrade order: first every reader (all Octant services and other
//! consumers of Octant's topics) to a release that accepts both — run the new release with
//! `kafka.avro_fingerprint = "legacy"` so that its writers keep the old headers meanwhile —,
//! then switch the writers (remove the setting; `standard` is the default), then the external
//! producers that still write legacy fingerprints.
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, LazyLock, OnceLock};

use apache_avro::Schema;
use apache_avro::reader::datum::GenericDatumReader;
use apache_avro::writer::datum::GenericDatumWriter;
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::canonical;
use crate::types::*;

include!(concat!(env!("OUT_DIR"), "/embedded_schemas.rs"));

/// Magic of the Avro single-object encoding.
pub const SINGLE_OBJECT_MAGIC: [u8; 2] = [0xC3, 0x01];
/// Magic byte of the Confluent wire format.
pub const CONFLUENT_MAGIC: u8 = 0;

/// One schema file under `schemas/`: the current version of a type (`version` = "current")
/// or a released one (`schemas/released/<version>/…`).
pub struct KnownSchema {
    /// Path under `schemas/`.
    pub path: &'static str,
    /// "current" or the release directory name (e.g. "v1").
    pub version: &'static str,
    /// Full name, e.g. `ai.octant.v1.TrajectoryEvent`.
    pub full_name: String,
    pub schema: Schema,
    /// The Parsing Canonical Form (Avro specification), from which the fingerprint is taken.
    pub canonical_form: String,
    /// CRC-64-AVRO fingerprint of the canonical form, little-endian, as in single-object
    /// headers.
    pub fingerprint: [u8; 8],
    /// The fingerprint Octant wrote before following the specification (accepted on input,
    /// written only under [`FingerprintKind::Legacy`]).
    pub legacy_fingerprint: [u8; 8],
    /// The schema's writer (its names resolved), built at first use: resolving per record was
    /// a large share of the scorer's encoding cost.
    writer: OnceLock<GenericDatumWriter<'static>>,
    /// Its reader resolved to the current schema of the same name, built at first use.
    reader: OnceLock<Result<GenericDatumReader<'static>, String>>,
}

impl std::fmt::Debug for KnownSchema {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KnownSchema")
            .field("path", &self.path)
            .field("version", &self.version)
            .field("full_name", &self.full_name)
            .finish_non_exhaustive()
    }
}

/// Every embedded schema, parsed once. A schema that does not parse is a build defect: the
/// contracts test fails on it, and this panics at first use.
pub static KNOWN: LazyLock<Vec<KnownSchema>> = LazyLock::new(|| {
    EMBEDDED
        .iter()
        .map(|(path, text)| {
            let schema = Schema::parse_str(text).unwrap_or_else(|e| panic!("schemas/{path} does not parse: {e}"));
            let full_name = schema.name().map(|n| n.fullname(None)).unwrap_or_default();
            let canonical_form = canonical::parsing_canonical_form(text).unwrap_or_else(|e| panic!("schemas/{path}: {e}"));
            let fingerprint = canonical::crc64_avro(canonical_form.as_bytes()).to_le_bytes();
            let legacy_fingerprint = canonical::legacy_fingerprint(&schema);
            let version = match path.strip_prefix("released/") {
                Some(rest) => rest.split('/').next().unwrap_or("released"),
                None => "current",
            };
            KnownSchema {
                path,
                version,
                full_name,
                schema,
                canonical_form,
                fingerprint,
                legacy_fingerprint,
                writer: OnceLock::new(),
                reader: OnceLock::new(),
            }
        })
        .collect()
});

fn find_known(file: &str) -> &'static KnownSchema {
    KNOWN.iter().find(|k| k.path == file).unwrap_or_else(|| panic!("schemas/{file} is not embedded"))
}

impl KnownSchema {
    /// The writer of this schema (built once).
    fn writer(&'static self) -> &'static GenericDatumWriter<'static> {
        self.writer
            .get_or_init(|| GenericDatumWriter::builder(&self.schema).build().unwrap_or_else(|e| panic!("schemas/{}: {e}", self.path)))
    }
}

/// A Rust type bound to its Avro schema.
pub trait Contract: Serialize + DeserializeOwned {
    /// Full Avro name, e.g. `ai.octant.v1.Observation`.
    const FULL_NAME: &'static str;
    /// File under `schemas/`, e.g. `observation.avsc`.
    const FILE: &'static str;

    /// The current schema.
    fn known() -> &'static KnownSchema {
        find_known(Self::FILE)
    }

    fn schema() -> &'static Schema {
        &Self::known().schema
    }

    /// Appends the Avro binary datum of `self` to `out`. The default is the schema-driven
    /// writer of apache-avro; a type on a hot path may write its datum by hand, and a test
    /// then proves the bytes equal the default's ([`write_datum_generic`]).
    fn write_datum(&self, out: &mut Vec<u8>) -> Result<(), EncodeError> {
        write_datum_generic(self, out)
    }
}

/// The schema-driven Avro datum of `value` (apache-avro), appended to `out`.
pub fn write_datum_generic<T: Contract>(value: &T, out: &mut Vec<u8>) -> Result<(), EncodeError> {
    T::known().writer().write_ser(out, value).map(|_| ()).map_err(encode_err::<T>)
}

macro_rules! contract {
    ($t:ty, $name:literal, $file:literal $(, $write:path)?) => {
        impl Contract for $t {
            const FULL_NAME: &'static str = concat!("ai.octant.v1.", $name);
            const FILE: &'static str = $file;

            fn known() -> &'static KnownSchema {
                static KNOWN_HERE: OnceLock<&'static KnownSchema> = OnceLock::new();
                KNOWN_HERE.get_or_init(|| find_known($file))
            }

            $(
                fn write_datum(&self, out: &mut Vec<u8>) -> Result<(), EncodeError> {
                    $write(self, out);
                    Ok(())
                }
            )?
        }
    };
}

/// Avro binary primitives for the hand-written datum writers (Avro specification, "Binary
/// Encoding"): zig-zag varints for int and long, length-prefixed strings, little-endian
/// doubles, a union as its branch index then the value.
mod binary {
    pub fn long(out: &mut Vec<u8>, v: i64) {
        let mut z = ((v << 1) ^ (v >> 63)) as u64;
        while z >= 0x80 {
            out.push((z as u8) | 0x80);
            z >>= 7;
        }
        out.push(z as u8);
    }

    pub fn string(out: &mut Vec<u8>, s: &str) {
        long(out, s.len() as i64);
        out.extend_from_slice(s.as_bytes());
    }

    pub fn double(out: &mut Vec<u8>, v: f64) {
        out.extend_from_slice(&v.to_le_bytes());
    }

    /// `["null", T]`: branch 0, or branch 1 and the value.
    pub fn optional<T>(out: &mut Vec<u8>, v: &Option<T>, write: impl FnOnce(&mut Vec<u8>, &T)) {
        match v {
            None => long(out, 0),
            Some(x) => {
                long(out, 1);
                write(out, x);
            }
        }
    }
}

/// The datum of an [`Observation`], written by hand: the scorer writes several per event, and
/// apache-avro's schema-driven serializer (field lookup by name, dynamic unions) was the
/// largest share of the scorer's work. Field order is `schemas/observation.avsc`'s; the
/// contracts test proves the bytes equal the schema-driven writer's for arbitrary values.
fn observation_datum(o: &Observation, out: &mut Vec<u8>) {
    use binary::*;
    let string_ = |out: &mut Vec<u8>, s: &String| string(out, s);
    string(out, &o.observation_id);
    string(out, &o.metric);
    string(out, &o.system_id);
    string(out, &o.system_version);
    long(
        out,
        match o.source {
            Source::Production => 0,
            Source::Evaluation => 1,
        },
    );
    optional(out, &o.agent_id, string_);
    string(out, &o.run_id);
    optional(out, &o.task_id, string_);
    optional(out, &o.attempt, |out, v| long(out, i64::from(*v)));
    if !o.groups.is_empty() {
        long(out, o.groups.len() as i64);
        for g in &o.groups {
            string(out, g);
        }
    }
    long(out, 0);
    optional(out, &o.benchmark, string_);
    optional(out, &o.task_family, string_);
    string(out, &o.cluster_id);
    optional(out, &o.step, |out, v| long(out, *v));
    long(out, o.event_time);
    double(out, o.value);
    double(out, o.weight);
    optional(out, &o.confidence, |out, v| double(out, *v));
    optional(out, &o.provenance, |out, p| {
        long(
            out,
            match p {
                Provenance::Verifier => 0,
                Provenance::Human => 1,
                Provenance::Judge => 2,
                Provenance::SelfReported => 3,
                Provenance::Abandoned => 4,
            },
        )
    });
    optional(out, &o.rerun_of, string_);
}

contract!(TrajectoryEvent, "TrajectoryEvent", "trajectory_event.avsc");
contract!(Observation, "Observation", "observation.avsc", observation_datum);
contract!(MetricWindow, "MetricWindow", "metric_window.avsc");
contract!(DimensionProfile, "DimensionProfile", "dimension_profile.avsc");
contract!(Alert, "Alert", "alert.avsc");
contract!(Profile, "Profile", "profile.avsc");
contract!(DeadLetter, "DeadLetter", "dead_letter.avsc");
contract!(Watermark, "Watermark", "watermark.avsc");
contract!(ReRunRequest, "ReRunRequest", "rerun_request.avsc");

/// An encoding failure: the value does not fit its schema (a bug, not bad input).
#[derive(Debug, thiserror::Error)]
#[error("failed to encode {type_name} as Avro: {source}")]
pub struct EncodeError {
    pub type_name: &'static str,
    #[source]
    pub source: Box<dyn std::error::Error + Send + Sync>,
}

/// Why bytes could not be decoded. `class()` names the dead-letter error class.
#[derive(Debug, thiserror::Error)]
pub enum DecodeError {
    #[error("empty payload")]
    Empty,
    #[error("record of {len} bytes is over the input limit of {limit} bytes")]
    TooLarge { len: usize, limit: usize },
    #[error("unrecognised framing: first byte 0x{first:02x} is neither Avro single-object (C3 01), Confluent (00) nor JSON ({{)")]
    UnknownFraming { first: u8 },
    #[error("truncated {framing} header ({len} bytes)")]
    Truncated { framing: &'static str, len: usize },
    #[error("unknown schema fingerprint {fingerprint}")]
    UnknownFingerprint { fingerprint: String },
    #[error("unknown Confluent schema id {id}")]
    UnknownSchemaId { id: u32 },
    #[error("expected {expected}, got a {found} record")]
    WrongType { expected: &'static str, found: String },
    #[error("Avro datum does not decode: {0}")]
    Avro(String),
    #[error("JSON does not decode: {0}")]
    Json(String),
}

impl DecodeError {
    /// Stable error class for dead letters and metrics.
    pub fn class(&self) -> &'static str {
        match self {
            DecodeError::UnknownFingerprint { .. } | DecodeError::UnknownSchemaId { .. } => "unknown_schema",
            DecodeError::WrongType { .. } => "wrong_type",
            DecodeError::TooLarge { .. } => "too_large",
            _ => "undecodable",
        }
    }
}

fn encode_err<T>(e: apache_avro::Error) -> EncodeError {
    EncodeError { type_name: std::any::type_name::<T>(), source: Box::new(e) }
}

/// Raw Avro binary datum (no header), written with the current schema.
pub fn to_avro<T: Contract>(value: &T) -> Result<Vec<u8>, EncodeError> {
    let mut out = Vec::with_capacity(256);
    value.write_datum(&mut out)?;
    Ok(out)
}

/// Which fingerprint single-object headers carry when Octant writes them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FingerprintKind {
    /// The Avro specification's (CRC-64-AVRO of the Parsing Canonical Form): the default.
    #[default]
    Standard,
    /// What Octant 0.1 wrote; only for a rolling upgrade while old readers remain.
    Legacy,
}

static WRITE_LEGACY: AtomicBool = AtomicBool::new(false);

/// Sets, for the whole process, which fingerprint [`to_single_object`] writes. Services call
/// it at start-up from `kafka.avro_fingerprint`; the default is [`FingerprintKind::Standard`].
pub fn set_write_fingerprint(kind: FingerprintKind) {
    WRITE_LEGACY.store(kind == FingerprintKind::Legacy, Ordering::Relaxed);
}

/// Avro single-object encoding: `C3 01`, the schema fingerprint (the kind the process was
/// set to write, [`set_write_fingerprint`]), the datum.
pub fn to_single_object<T: Contract>(value: &T) -> Result<Vec<u8>, EncodeError> {
    let kind = if WRITE_LEGACY.load(Ordering::Relaxed) { FingerprintKind::Legacy } else { FingerprintKind::Standard };
    to_single_object_with(value, kind)
}

/// Avro single-object encoding with the given kind of fingerprint.
pub fn to_single_object_with<T: Contract>(value: &T, kind: FingerprintKind) -> Result<Vec<u8>, EncodeError> {
    let mut out = Vec::with_capacity(256);
    out.extend_from_slice(&SINGLE_OBJECT_MAGIC);
    let known = T::known();
    out.extend_from_slice(match kind {
        FingerprintKind::Standard => &known.fingerprint,
        FingerprintKind::Legacy => &known.legacy_fingerprint,
    });
    value.write_datum(&mut out)?;
    Ok(out)
}

/// Confluent framing with a declared schema id.
pub fn to_confluent<T: Contract>(value: &T, schema_id: u32) -> Result<Vec<u8>, EncodeError> {
    let mut out = Vec::with_capacity(256);
    out.push(CONFLUENT_MAGIC);
    out.extend_from_slice(&schema_id.to_be_bytes());
    value.write_datum(&mut out)?;
    Ok(out)
}

/// JSON with the schema's field names.
pub fn to_json<T: Contract>(value: &T) -> Vec<u8> {
    serde_json::to_vec(value).expect("contract types serialise to JSON")
}

/// The input limit: a record over this many bytes is refused (class `too_large`) before it is
/// parsed. Kafka's default `message.max.bytes` is about 1 MB, so a record Octant accepts always
/// fits the default broker too; one at the limit is read.
pub const MAX_RECORD_BYTES: usize = 1 << 20;

/// A datum being read: remembers whether a read asked for more than was left.
struct Bounded<'a> {
    rest: &'a [u8],
    short: bool,
}

impl std::io::Read for Bounded<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if buf.len() > self.rest.len() {
            self.short = true;
        }
        self.rest.read(buf)
    }
}

/// Decodes a raw datum written with `writer`, resolved to the current schema of `T`.
pub fn from_avro<T: Contract>(datum: &[u8], writer: &Schema) -> Result<T, DecodeError> {
    let reader = GenericDatumReader::builder(writer).reader_schema(T::schema()).build().map_err(|e| DecodeError::Avro(e.to_string()))?;
    read_datum(&reader, datum)
}

/// [`from_avro`] with an embedded writer schema, whose resolved reader is kept (resolving
/// both schemas per record cost more than reading it). `writer` names `T` (checked by the
/// caller), so the reader built at first use is the same for every later call.
fn from_avro_known<T: Contract>(datum: &[u8], writer: &'static KnownSchema) -> Result<T, DecodeError> {
    let reader = writer
        .reader
        .get_or_init(|| GenericDatumReader::builder(&writer.schema).reader_schema(T::schema()).build().map_err(|e| e.to_string()))
        .as_ref()
        .map_err(|e| DecodeError::Avro(e.clone()))?;
    read_datum(reader, datum)
}

fn read_datum<T: Contract>(reader: &GenericDatumReader<'_>, datum: &[u8]) -> Result<T, DecodeError> {
    let mut input = Bounded { rest: datum, short: false };
    let value = reader.read_value(&mut input).map_err(|e| DecodeError::Avro(e.to_string()))?;
    if input.short {
        // apache-avro can read the end of input inside a value as zeros (e.g. trailing union
        // indices): a datum that needed more bytes than it has is truncated, whatever it read.
        return Err(DecodeError::Avro(format!("truncated datum: {} bytes end inside the value", datum.len())));
    }
    if !input.rest.is_empty() {
        return Err(DecodeError::Avro(format!("{} trailing bytes after the datum", input.rest.len())));
    }
    apache_avro::from_value::<T>(&value).map_err(|e| DecodeError::Avro(e.to_string()))
}

/// How a payload was framed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Framing {
    SingleObject,
    /// Single-object with a pre-specification fingerprint (accepted, counted).
    SingleObjectLegacy,
    Confluent,
    Json,
    /// Plain Avro binary of the schema the decoder was declared for.
    PlainBinary,
}

/// Called once per record decoded with a legacy fingerprint (a service counts them).
pub type LegacyHook = Arc<dyn Fn() + Send + Sync>;

/// Decodes any framing into a contract type. Holds the declared Confluent id table, the
/// schema of plain binary input if declared, and what to do on a legacy-fingerprint record.
#[derive(Default, Clone)]
pub struct Decoder {
    confluent: HashMap<u32, &'static str>,
    plain: Option<&'static KnownSchema>,
    on_legacy: Option<LegacyHook>,
}

impl std::fmt::Debug for Decoder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Decoder")
            .field("confluent", &self.confluent)
            .field("plain", &self.plain.map(|k| k.path))
            .field("counts_legacy", &self.on_legacy.is_some())
            .finish()
    }
}

fn known_path(path: &str) -> Result<&'static KnownSchema, String> {
    KNOWN.iter().find(|k| k.path == path).ok_or_else(|| format!("no schema schemas/{path}"))
}

impl Decoder {
    pub fn new() -> Self {
        Self::default()
    }

    /// Declares that Confluent schema id `id` is the schema file `path` under `schemas/`
    /// (e.g. `trajectory_event.avsc` or `released/v1/trajectory_event.avsc`). Returns an
    /// error naming the path if no such schema is embedded.
    pub fn with_confluent_id(mut self, id: u32, path: &str) -> Result<Self, String> {
        self.confluent.insert(id, known_path(path)?.path);
        Ok(self)
    }

    /// Declares that every payload is a plain Avro binary datum (no header) written with the
    /// schema file `path` (e.g. `trajectory_event.avsc`). Exclusive: a plain datum's first
    /// byte can be anything, so a decoder declared this way reads no other framing.
    pub fn with_plain_binary(mut self, path: &str) -> Result<Self, String> {
        self.plain = Some(known_path(path)?);
        Ok(self)
    }

    /// Calls `hook` for every record decoded with a legacy (pre-specification) single-object
    /// fingerprint; services count them (`octant_runtime::admin::count_legacy_fingerprints`).
    pub fn on_legacy(mut self, hook: LegacyHook) -> Self {
        self.on_legacy = Some(hook);
        self
    }

    /// The framing and writer schema of a payload, without decoding the datum; `None` for JSON.
    pub fn writer_of<'a>(&self, bytes: &'a [u8]) -> Result<(Framing, Option<&'static KnownSchema>, &'a [u8]), DecodeError> {
        let first = *bytes.first().ok_or(DecodeError::Empty)?;
        if let Some(plain) = self.plain {
            return Ok((Framing::PlainBinary, Some(plain), bytes));
        }
        if bytes.starts_with(&SINGLE_OBJECT_MAGIC) {
            if bytes.len() < 10 {
                return Err(DecodeError::Truncated { framing: "single-object", len: bytes.len() });
            }
            let fp = &bytes[2..10];
            if let Some(known) = KNOWN.iter().find(|k| k.fingerprint == fp) {
                return Ok((Framing::SingleObject, Some(known), &bytes[10..]));
            }
            if let Some(known) = KNOWN.iter().find(|k| k.legacy_fingerprint == fp) {
                return Ok((Framing::SingleObjectLegacy, Some(known), &bytes[10..]));
            }
            return Err(DecodeError::UnknownFingerprint { fingerprint: hex(fp) });
        }
        if first == CONFLUENT_MAGIC {
            if bytes.len() < 5 {
                return Err(DecodeError::Truncated { framing: "Confluent", len: bytes.len() });
            }
            let id = u32::from_be_bytes(bytes[1..5].try_into().unwrap());
            let path = self.confluent.get(&id).ok_or(DecodeError::UnknownSchemaId { id })?;
            let known = KNOWN.iter().find(|k| k.path == *path).expect("checked when declared");
            return Ok((Framing::Confluent, Some(known), &bytes[5..]));
        }
        if bytes.iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'{') {
            return Ok((Framing::Json, None, bytes));
        }
        Err(DecodeError::UnknownFraming { first })
    }

    /// Decodes a payload of any accepted framing into `T`.
    pub fn decode<T: Contract>(&self, bytes: &[u8]) -> Result<T, DecodeError> {
        if bytes.len() > MAX_RECORD_BYTES {
            return Err(DecodeError::TooLarge { len: bytes.len(), limit: MAX_RECORD_BYTES });
        }
        match self.writer_of(bytes)? {
            (framing, Some(known), datum) => {
                if known.full_name != T::FULL_NAME {
                    return Err(DecodeError::WrongType { expected: T::FULL_NAME, found: known.full_name.clone() });
                }
                let value = from_avro_known(datum, known)?;
                if let (Framing::SingleObjectLegacy, Some(hook)) = (framing, &self.on_legacy) {
                    hook();
                }
                Ok(value)
            }
            (_, None, json) => serde_json::from_slice(json).map_err(|e| DecodeError::Json(e.to_string())),
        }
    }
}

/// Decodes a payload of any accepted framing into the JSON value of the contract its writer
/// schema names (JSON input is read as a trajectory event, the only contract accepted as
/// JSON); returns the writer's full name (empty for JSON) and the value. For readers that take
/// every topic (the lake writer) and for redaction of dead-letter payloads.
pub fn decode_value(decoder: &Decoder, payload: &[u8]) -> Result<(String, serde_json::Value), String> {
    let (_, known, _) = decoder.writer_of(payload).map_err(|e| e.to_string())?;
    let name = known.map(|k| k.full_name.clone()).unwrap_or_default();
    fn to<T: Contract>(d: &Decoder, p: &[u8]) -> Result<serde_json::Value, String> {
        let v: T = d.decode(p).map_err(|e| e.to_string())?;
        serde_json::to_value(&v).map_err(|e| e.to_string())
    }
    let value = match name.as_str() {
        "ai.octant.v1.TrajectoryEvent" => to::<TrajectoryEvent>(decoder, payload),
        "ai.octant.v1.Observation" => to::<Observation>(decoder, payload),
        "ai.octant.v1.Watermark" => to::<Watermark>(decoder, payload),
        "ai.octant.v1.MetricWindow" => to::<MetricWindow>(decoder, payload),
        "ai.octant.v1.DimensionProfile" => to::<DimensionProfile>(decoder, payload),
        "ai.octant.v1.Alert" => to::<Alert>(decoder, payload),
        "ai.octant.v1.Profile" => to::<Profile>(decoder, payload),
        "ai.octant.v1.DeadLetter" => to::<DeadLetter>(decoder, payload),
        "ai.octant.v1.ReRunRequest" => to::<ReRunRequest>(decoder, payload),
        _ => to::<TrajectoryEvent>(decoder, payload).map_err(|e| format!("{e} (writer {name:?})")),
    }?;
    Ok((name, value))
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}
