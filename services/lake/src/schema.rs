//! Lake tables: which records go where, and their Arrow schemas, derived from the Avro
//! contracts (so a schema change reaches the lake without a second definition).
//!
//! Mapping: string and enum → Utf8; int → Int32; long → Int64; `timestamp-millis` →
//! Timestamp(ms, UTC); double → Float64; float → Float32; boolean → Boolean; bytes → Utf8
//! holding lower-case hex (see [`hex_bytes`]); array → List; record → Struct; `[null, T]` →
//! nullable T. Every table adds `kafka_topic`, `kafka_partition`, `kafka_offset` (where the
//! record came from: the exactly-once key) and has a top-level `system_id` column (the
//! record's own, `system.id` for trajectory events, null where a record has no system): files
//! are sorted by it. The partition key `date` is in the path and the table's Delta log, not in
//! the files.

use std::collections::HashMap;
use std::sync::Arc;

use apache_avro::Schema as Avro;
use arrow::datatypes::{DataType, Field, Fields, Schema, SchemaRef, TimeUnit};
use octant_contracts::codec::KNOWN;

/// One lake table.
#[derive(Debug, Clone)]
pub struct Table {
    pub name: &'static str,
    /// Avro full name of its records (`None`: raw records that did not decode).
    pub record: Option<&'static str>,
    /// JSON pointer of the system id in a record (`None`: no system; a null `system_id`).
    pub system: Option<&'static str>,
    /// JSON pointer of the event time that decides the `date` partition.
    pub time: &'static str,
}

/// The tables, in a stable order.
pub const TABLES: &[Table] = &[
    Table { name: "trajectory_events", record: Some("ai.octant.v1.TrajectoryEvent"), system: Some("/system/id"), time: "/event_time" },
    Table { name: "observations", record: Some("ai.octant.v1.Observation"), system: Some("/system_id"), time: "/event_time" },
    Table { name: "watermarks", record: Some("ai.octant.v1.Watermark"), system: None, time: "/produced_at" },
    Table { name: "metric_windows", record: Some("ai.octant.v1.MetricWindow"), system: Some("/system_id"), time: "/window_end" },
    Table { name: "dimension_profiles", record: Some("ai.octant.v1.DimensionProfile"), system: Some("/system_id"), time: "/window_end" },
    Table { name: "alerts", record: Some("ai.octant.v1.Alert"), system: Some("/system_id"), time: "/starts_at" },
    Table { name: "profiles", record: Some("ai.octant.v1.Profile"), system: Some("/system_id"), time: "/generated_at" },
    Table { name: "rerun_requests", record: Some("ai.octant.v1.ReRunRequest"), system: Some("/system_id"), time: "/requested_at" },
    Table { name: "dead_letters", record: Some("ai.octant.v1.DeadLetter"), system: None, time: "/failed_at" },
    Table { name: "raw_records", record: None, system: None, time: "/kafka_timestamp" },
];

/// Hive's name for a missing partition value (pane-store file names; the lake's `system_id`
/// column is null instead).
pub const NO_SYSTEM: &str = "__HIVE_DEFAULT_PARTITION__";

pub fn table(name: &str) -> Option<&'static Table> {
    TABLES.iter().find(|t| t.name == name)
}

/// The table of records with Avro full name `full_name`.
pub fn table_of(full_name: &str) -> Option<&'static Table> {
    TABLES.iter().find(|t| t.record == Some(full_name))
}

fn kafka_fields() -> Vec<Field> {
    vec![
        Field::new("kafka_topic", DataType::Utf8, false),
        Field::new("kafka_partition", DataType::Int32, false),
        Field::new("kafka_offset", DataType::Int64, false),
    ]
}

/// The Arrow schema of `table`'s files.
pub fn arrow_schema(table: &Table) -> SchemaRef {
    let mut fields = kafka_fields();
    if table.system != Some("/system_id") {
        fields.push(Field::new("system_id", DataType::Utf8, true));
    }
    match table.record {
        None => {
            fields.push(Field::new("kafka_timestamp", DataType::Timestamp(TimeUnit::Millisecond, Some("+00:00".into())), true));
            fields.push(Field::new("key", DataType::Utf8, true));
            fields.push(Field::new("payload", DataType::Utf8, false));
            fields.push(Field::new("error", DataType::Utf8, false));
        }
        Some(full_name) => {
            let known = KNOWN
                .iter()
                .find(|k| k.version == "current" && k.full_name == full_name)
                .unwrap_or_else(|| panic!("{full_name} is not a known contract"));
            let mut named = HashMap::new();
            let Avro::Record(r) = &known.schema else { panic!("{full_name} is not a record") };
            for f in &r.fields {
                let (dt, nullable) = arrow_type(&f.schema, &mut named);
                fields.push(Field::new(&f.name, dt, nullable));
            }
        }
    }
    Arc::new(Schema::new(fields))
}

/// The Arrow type of an Avro schema, and whether it is nullable. `named` collects named
/// types as they are defined, for later references.
fn arrow_type(s: &Avro, named: &mut HashMap<String, (DataType, bool)>) -> (DataType, bool) {
    let t = match s {
        Avro::Null => return (DataType::Null, true),
        Avro::Boolean => DataType::Boolean,
        Avro::Int => DataType::Int32,
        Avro::Long => DataType::Int64,
        Avro::Float => DataType::Float32,
        Avro::Double => DataType::Float64,
        Avro::Bytes => DataType::Utf8,
        Avro::String | Avro::Uuid(_) => DataType::Utf8,
        Avro::TimestampMillis => DataType::Timestamp(TimeUnit::Millisecond, Some("+00:00".into())),
        Avro::Enum(e) => {
            named.insert(e.name.name().to_string(), (DataType::Utf8, false));
            DataType::Utf8
        }
        Avro::Array(a) => {
            let (item, nullable) = arrow_type(&a.items, named);
            DataType::List(Arc::new(Field::new("item", item, nullable)))
        }
        Avro::Record(r) => {
            let fields: Fields = r
                .fields
                .iter()
                .map(|f| {
                    let (dt, nullable) = arrow_type(&f.schema, named);
                    Field::new(&f.name, dt, nullable)
                })
                .collect();
            let dt = DataType::Struct(fields);
            named.insert(r.name.name().to_string(), (dt.clone(), false));
            dt
        }
        Avro::Union(u) => {
            let non_null: Vec<&Avro> = u.variants().iter().filter(|v| !matches!(v, Avro::Null)).collect();
            assert_eq!(non_null.len(), 1, "only [null, T] unions are used in the contracts");
            let (dt, _) = arrow_type(non_null[0], named);
            return (dt, true);
        }
        Avro::Ref { name } => return named.get(name.name()).cloned().unwrap_or_else(|| panic!("unresolved reference {}", name.name())),
        other => panic!("Avro type {other:?} is not used in the contracts"),
    };
    (t, false)
}

/// Bytes are written as lower-case hex (readable by every engine; `unhex()` in SQL).
pub fn hex_bytes(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_contract_has_a_table_and_a_schema() {
        for k in KNOWN.iter().filter(|k| k.version == "current") {
            let t = table_of(&k.full_name).unwrap_or_else(|| panic!("{} has no table", k.full_name));
            let s = arrow_schema(t);
            assert!(s.fields().iter().take(3).map(|f| f.as_ref().clone()).eq(kafka_fields()), "{}", k.full_name);
        }
        let obs = arrow_schema(table("observations").unwrap());
        for t in TABLES {
            let system = arrow_schema(t).field_with_name("system_id").unwrap_or_else(|_| panic!("{}: system_id", t.name)).clone();
            assert_eq!(system.data_type(), &DataType::Utf8, "{}", t.name);
        }
        assert_eq!(
            obs.field_with_name("event_time").unwrap().data_type(),
            &DataType::Timestamp(TimeUnit::Millisecond, Some("+00:00".into()))
        );
        assert!(obs.field_with_name("confidence").unwrap().is_nullable());
        let ev = arrow_schema(table("trajectory_events").unwrap());
        assert!(matches!(ev.field_with_name("step").unwrap().data_type(), DataType::Struct(_)));
        assert!(matches!(ev.field_with_name("system").unwrap().data_type(), DataType::Struct(_)));
        let _ = arrow_schema(table("raw_records").unwrap());
    }
}
