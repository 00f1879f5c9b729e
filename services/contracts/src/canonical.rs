//! Avro's Parsing Canonical Form and the CRC-64-AVRO fingerprint, per the specification
//! ("Parsing Canonical Form for Schemas" and "Schema Fingerprints"), so that single-object
//! headers written here are resolved by every other implementation and theirs by Octant.
//!
//! Why not the apache-avro crate's: up to the version used (0.22) its canonical form keeps a
//! primitive with a logical type as `{"type":"long"}` instead of reducing it to `"long"`
//! ([STRIP] removes `logicalType`, then [PRIMITIVES] applies; fixed upstream as AVRO-4004), so
//! its fingerprint of every Octant schema differs from Java's, Python's (fastavro) and the
//! specification's. Those fingerprints stay accepted on input as *legacy* for a deprecation
//! period (see [`crate::codec`]); [`legacy_fingerprint`] computes them.
//!
//! The transformation rules, applied to the schema's JSON:
//! - [PRIMITIVES] a primitive, also one written as an object with attributes
//!   (`{"type":"long","logicalType":"timestamp-millis"}`), is its bare name: `"long"`;
//! - [FULLNAMES] every name (definitions and references) is its fullname, resolved against
//!   the `namespace` attribute or the enclosing named type's namespace;
//! - [STRIP] only `type`, `name`, `fields`, `symbols`, `items`, `values` and `size` remain;
//! - [ORDER] in that order: `name`, `type`, `fields`, `symbols`, `items`, `values`, `size`;
//! - [STRINGS], [INTEGERS], [WHITESPACE]: strings as UTF-8 with JSON's minimal escapes,
//!   integers without quotes or leading zeros, no white space outside strings.
//!
//! A named type appears whole at its first occurrence (in depth-first, left-to-right order)
//! and as its fullname afterwards, as in the schema text itself.

use serde_json::Value;

const PRIMITIVES: [&str; 8] = ["null", "boolean", "int", "long", "float", "double", "bytes", "string"];

/// The Parsing Canonical Form of a schema given as JSON text.
pub fn parsing_canonical_form(schema_json: &str) -> Result<String, String> {
    let v: Value = serde_json::from_str(schema_json).map_err(|e| format!("schema is not JSON: {e}"))?;
    let mut out = String::with_capacity(schema_json.len() / 2);
    write(&v, "", &mut out)?;
    Ok(out)
}

/// CRC-64-AVRO (the specification's Rabin fingerprint) of `bytes`.
pub fn crc64_avro(bytes: &[u8]) -> u64 {
    const EMPTY: u64 = 0xc15d_213a_a4d7_a795;
    static TABLE: std::sync::LazyLock<[u64; 256]> = std::sync::LazyLock::new(|| {
        let mut table = [0u64; 256];
        for (i, slot) in table.iter_mut().enumerate() {
            let mut fp = i as u64;
            for _ in 0..8 {
                fp = (fp >> 1) ^ (EMPTY & (fp & 1).wrapping_neg());
            }
            *slot = fp;
        }
        table
    });
    let mut fp = EMPTY;
    for &b in bytes {
        fp = (fp >> 8) ^ TABLE[((fp ^ u64::from(b)) & 0xff) as usize];
    }
    fp
}

/// The 8 bytes a single-object header carries: CRC-64-AVRO of the canonical form,
/// little-endian.
pub fn fingerprint(schema_json: &str) -> Result<[u8; 8], String> {
    Ok(crc64_avro(parsing_canonical_form(schema_json)?.as_bytes()).to_le_bytes())
}

/// The fingerprint Octant wrote before it followed the specification: the apache-avro crate's
/// canonical form, which keeps logical-typed primitives as objects. Accepted on input only.
pub fn legacy_fingerprint(schema: &apache_avro::Schema) -> [u8; 8] {
    let fp = schema.fingerprint::<apache_avro::rabin::Rabin>();
    let mut out = [0u8; 8];
    out.copy_from_slice(&fp.bytes[..8]);
    out
}

fn fullname(name: &str, namespace: &str) -> String {
    if name.contains('.') || namespace.is_empty() { name.to_string() } else { format!("{namespace}.{name}") }
}

fn push_str(s: &str, out: &mut String) {
    out.push_str(&serde_json::to_string(s).expect("a string serialises"));
}

fn write(v: &Value, namespace: &str, out: &mut String) -> Result<(), String> {
    match v {
        Value::String(s) if PRIMITIVES.contains(&s.as_str()) => push_str(s, out),
        Value::String(s) => push_str(&fullname(s, namespace), out),
        Value::Array(branches) => {
            out.push('[');
            for (i, b) in branches.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write(b, namespace, out)?;
            }
            out.push(']');
        }
        Value::Object(o) => {
            let ty = o.get("type").ok_or("a schema object without \"type\"")?;
            let Value::String(ty) = ty else {
                // {"type": {...}} or {"type": [...]}: the attribute holds the schema itself.
                return write(ty, namespace, out);
            };
            match ty.as_str() {
                t if PRIMITIVES.contains(&t) => push_str(t, out),
                "record" | "error" | "enum" | "fixed" => {
                    let name = o.get("name").and_then(Value::as_str).ok_or_else(|| format!("a {ty} without a name"))?;
                    let ns = match o.get("namespace").and_then(Value::as_str) {
                        Some(ns) if !name.contains('.') => ns,
                        _ => namespace,
                    };
                    let full = fullname(name, ns);
                    let inner_ns = full.rsplit_once('.').map_or("", |(n, _)| n);
                    out.push_str("{\"name\":");
                    push_str(&full, out);
                    out.push_str(",\"type\":");
                    push_str(if ty == "error" { "error" } else { ty }, out);
                    match ty.as_str() {
                        "enum" => {
                            out.push_str(",\"symbols\":[");
                            let symbols = o.get("symbols").and_then(Value::as_array).ok_or("an enum without symbols")?;
                            for (i, s) in symbols.iter().enumerate() {
                                if i > 0 {
                                    out.push(',');
                                }
                                push_str(s.as_str().ok_or("an enum symbol that is not a string")?, out);
                            }
                            out.push(']');
                        }
                        "fixed" => {
                            let size = match o.get("size") {
                                Some(Value::Number(n)) => n.as_u64(),
                                Some(Value::String(s)) => s.trim().parse::<u64>().ok(),
                                _ => None,
                            }
                            .ok_or("a fixed without an integer size")?;
                            out.push_str(&format!(",\"size\":{size}"));
                        }
                        _ => {
                            out.push_str(",\"fields\":[");
                            let fields = o.get("fields").and_then(Value::as_array).ok_or("a record without fields")?;
                            for (i, f) in fields.iter().enumerate() {
                                if i > 0 {
                                    out.push(',');
                                }
                                let fname = f.get("name").and_then(Value::as_str).ok_or("a field without a name")?;
                                out.push_str("{\"name\":");
                                push_str(fname, out);
                                out.push_str(",\"type\":");
                                write(f.get("type").ok_or_else(|| format!("field {fname} without a type"))?, inner_ns, out)?;
                                out.push('}');
                            }
                            out.push(']');
                        }
                    }
                    out.push('}');
                }
                "array" => {
                    out.push_str("{\"type\":\"array\",\"items\":");
                    write(o.get("items").ok_or("an array without items")?, namespace, out)?;
                    out.push('}');
                }
                "map" => {
                    out.push_str("{\"type\":\"map\",\"values\":");
                    write(o.get("values").ok_or("a map without values")?, namespace, out)?;
                    out.push('}');
                }
                // A reference to a named type written as {"type": "Name"}.
                other => push_str(&fullname(other, namespace), out),
            }
        }
        other => return Err(format!("not a schema: {other}")),
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The rules one by one; every Octant schema is also compared with fastavro's canonical
    /// form in the interoperability test (`tests/interop.rs`).
    #[test]
    fn canonical_forms_of_the_specification() {
        let cases = [
            (r#""int""#, r#""int""#),
            (r#"{"type":"int"}"#, r#""int""#),
            (r#"{"type":"long","logicalType":"timestamp-millis"}"#, r#""long""#),
            (r#"{"type":"fixed","name":"Foo","size":"012","namespace":"x.y","doc":"d"}"#, r#"{"name":"x.y.Foo","type":"fixed","size":12}"#),
            (r#"{"type":"enum","name":"E","symbols":["A","B"],"aliases":["F"]}"#, r#"{"name":"E","type":"enum","symbols":["A","B"]}"#),
            (r#"{"type":"array","items":{"type":"string"}}"#, r#"{"type":"array","items":"string"}"#),
            (r#"{"type":"map","values":"long","default":{}}"#, r#"{"type":"map","values":"long"}"#),
            (
                r#"{"fields":[{"type":"int","name":"a","default":1},{"name":"n","type":{"type":"record","name":"In","fields":[{"name":"s","type":"string"}]}},{"name":"r","type":["null","In"]}],"name":"R","namespace":"p.q","type":"record","doc":"x"}"#,
                r#"{"name":"p.q.R","type":"record","fields":[{"name":"a","type":"int"},{"name":"n","type":{"name":"p.q.In","type":"record","fields":[{"name":"s","type":"string"}]}},{"name":"r","type":["null","p.q.In"]}]}"#,
            ),
            (
                r#"{"type":"record","name":"a.b.R","namespace":"ignored","fields":[{"name":"é","type":{"type":"enum","name":"S","symbols":["X"]}}]}"#,
                r#"{"name":"a.b.R","type":"record","fields":[{"name":"é","type":{"name":"a.b.S","type":"enum","symbols":["X"]}}]}"#,
            ),
        ];
        for (schema, want) in cases {
            assert_eq!(parsing_canonical_form(schema).unwrap(), want, "{schema}");
        }
    }

    /// Reference values computed once with fastavro 1.12.2:
    /// `fastavro.schema.fingerprint(s, "CRC-64-AVRO")` (hex of the little-endian bytes), read
    /// back as a little-endian signed 64-bit integer.
    #[test]
    fn crc64_avro_matches_the_reference_values() {
        assert_eq!(crc64_avro(br#""null""#) as i64, 7_195_948_357_588_979_594);
        assert_eq!(crc64_avro(br#""boolean""#) as i64, -6_970_731_678_124_411_036);
        assert_eq!(crc64_avro(br#""int""#) as i64, 8_247_732_601_305_521_295);
        assert_eq!(crc64_avro(br#""long""#) as i64, -3_434_872_931_120_570_953);
        assert_eq!(crc64_avro(br#""string""#) as i64, -8_142_146_995_180_207_161);
    }

    #[test]
    fn legacy_differs_only_where_a_logical_type_is_involved() {
        let plain = r#"{"type":"record","name":"R","fields":[{"name":"a","type":"long"}]}"#;
        let logical = r#"{"type":"record","name":"R","fields":[{"name":"a","type":{"type":"long","logicalType":"timestamp-millis"}}]}"#;
        for (text, same) in [(plain, true), (logical, false)] {
            let parsed = apache_avro::Schema::parse_str(text).unwrap();
            assert_eq!(fingerprint(text).unwrap() == legacy_fingerprint(&parsed), same, "{text}");
        }
        // Both canonical forms of the logical schema reduce to the plain one: same fingerprint.
        assert_eq!(fingerprint(plain).unwrap(), fingerprint(logical).unwrap());
    }
}
