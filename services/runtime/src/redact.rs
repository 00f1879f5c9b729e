//! Redaction of personal data and secrets in what Octant writes: the lake, dead letters,
//! alerts (and so Alertmanager notifications), and the log lines that quote a record.
//!
//! Two ways, both configured in the shared `[redaction]` section (one file or one set of
//! `OCTANT_REDACTION__…` variables configures every service):
//! - **by field**: JSON pointers (`/step/arguments`; `*` matches every element of an array or
//!   every key of an object) whose value is replaced whole by `[redacted]`;
//! - **by pattern**, for free text: every string of a record except identifiers (keys `id`,
//!   `*_id`, `config_hash`, `fingerprint`) is searched for the built-in patterns `email`,
//!   `card_number` (13–19 digits, spaces or dashes between them, passing the Luhn check, with
//!   a card network's length and leading digits — an epoch timestamp is not a card) and
//!   `api_key` (the prefixes of common providers' keys, and `key=value` assignments whose name
//!   says secret, token, password or API key), and for `custom` regular expressions; a match
//!   becomes `[redacted:<name>]`.
//!
//! A payload that is not a record (a dead letter's bytes) is redacted as JSON when it parses as
//! JSON, as a record when it decodes as one of the contracts (then written back as JSON: the
//! scorer reads JSON trajectories, so a redacted dead letter can still be replayed), and else by
//! the patterns over its raw bytes, where Avro and protobuf keep strings verbatim.

use std::borrow::Cow;

use octant_contracts::codec::Decoder;
use regex::Regex;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The marker that replaces a field redacted whole.
pub const REDACTED: &str = "[redacted]";

/// The built-in patterns, by name.
pub const BUILT_IN: [&str; 3] = ["email", "card_number", "api_key"];

fn built_in(name: &str) -> Option<&'static str> {
    Some(match name {
        "email" => r"[A-Za-z0-9._%+\-]+@[A-Za-z0-9\-]+(?:\.[A-Za-z0-9\-]+)*\.[A-Za-z]{2,}",
        "card_number" => r"\b[0-9](?:[ \-]?[0-9]){12,18}\b",
        "api_key" => concat!(
            r"\b(?:sk|pk|rk)-[A-Za-z0-9_\-]{16,}",
            r"|\bAKIA[0-9A-Z]{16}\b",
            r"|\bgh[pousr]_[A-Za-z0-9]{20,}",
            r"|\bxox[abposr]-[A-Za-z0-9\-]{10,}",
            r"|\bAIza[0-9A-Za-z_\-]{30,}",
            r#"|(?i:\b[a-z_\-]*(?:api[_\-]?key|secret|token|password|passwd)["']?\s*[:=]\s*["']?)[^\s"',;}]{6,}"#,
        ),
        _ => return None,
    })
}

/// A pattern of the user's own.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CustomPattern {
    /// Named in the marker: `[redacted:<name>]`.
    pub name: String,
    /// A regular expression (Rust `regex` syntax).
    pub regex: String,
}

/// The shared `[redaction]` section.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RedactionConfig {
    /// JSON pointers of fields replaced whole (default: tool arguments and results of
    /// trajectory steps, the expected call's arguments, and incidents' tool arguments).
    #[serde(default = "default_fields")]
    pub fields: Vec<String>,
    /// Built-in patterns searched in free text (default: all of `email`, `card_number`,
    /// `api_key`; `[]` turns pattern redaction off).
    #[serde(default = "default_patterns")]
    pub patterns: Vec<String>,
    /// Further patterns.
    #[serde(default)]
    pub custom: Vec<CustomPattern>,
}

pub fn default_fields() -> Vec<String> {
    ["/step/arguments", "/step/result", "/step/expected_call/arguments", "/tool_arguments"].map(String::from).to_vec()
}

fn default_patterns() -> Vec<String> {
    BUILT_IN.map(String::from).to_vec()
}

impl Default for RedactionConfig {
    fn default() -> Self {
        RedactionConfig { fields: default_fields(), patterns: default_patterns(), custom: Vec::new() }
    }
}

impl RedactionConfig {
    /// Nothing redacted.
    pub fn none() -> Self {
        RedactionConfig { fields: Vec::new(), patterns: Vec::new(), custom: Vec::new() }
    }

    /// The redactor, or what is wrong with the section.
    pub fn build(&self) -> Result<Redactor, String> {
        if let Some(p) = self.fields.iter().find(|p| !p.starts_with('/')) {
            return Err(format!("redaction field {p:?} is not a JSON pointer (e.g. \"/step/arguments\")"));
        }
        let mut rules = Vec::new();
        for name in &self.patterns {
            let re = built_in(name).ok_or_else(|| {
                format!("unknown redaction pattern {name:?} (built in: {}; add others under [[redaction.custom]])", BUILT_IN.join(", "))
            })?;
            rules.push(Rule::new(name, re, name == "card_number")?);
        }
        for c in &self.custom {
            if c.name.is_empty() {
                return Err("a custom redaction pattern needs a name".into());
            }
            rules.push(Rule::new(&c.name, &c.regex, false)?);
        }
        Ok(Redactor { fields: self.fields.iter().map(|p| p.split('/').skip(1).map(unescape).collect()).collect(), rules })
    }
}

fn unescape(s: &str) -> String {
    s.replace("~1", "/").replace("~0", "~")
}

#[derive(Debug, Clone)]
struct Rule {
    marker: String,
    text: Regex,
    bytes: regex::bytes::Regex,
    luhn: bool,
}

impl Rule {
    fn new(name: &str, re: &str, luhn: bool) -> Result<Rule, String> {
        let bad = |e: regex::Error| format!("redaction pattern {name:?}: {e}");
        Ok(Rule {
            marker: format!("[redacted:{name}]"),
            text: Regex::new(re).map_err(bad)?,
            bytes: regex::bytes::Regex::new(re).map_err(bad)?,
            luhn,
        })
    }

    fn keeps(&self, m: &[u8]) -> bool {
        self.luhn && !(luhn(m) && card_shaped(m))
    }
}

/// Whether digits `s` (separators ignored) have the length and leading digits of a payment card
/// number: a major industry identifier of 2–6 (Mastercard 2, Amex/Diners/JCB 3, Visa 4,
/// Mastercard/Maestro 5, Discover/UnionPay/Maestro 6), 13 digits only for Visa (4), 14 for
/// Diners (30, 36, 38, 39), 15 for Amex (34, 37). Without it a tenth of all epoch timestamps
/// (13 digits in ms, 16 in µs, 19 in ns, all starting with 1) pass the Luhn check and were
/// redacted as card numbers (seen in a dead letter's error message).
fn card_shaped(s: &[u8]) -> bool {
    let d: Vec<u8> = s.iter().filter(|c| c.is_ascii_digit()).copied().collect();
    let two = d.get(..2).unwrap_or_default();
    match d.len() {
        13 => d[0] == b'4',
        14 => [b"30", b"36", b"38", b"39"].iter().any(|p| two == &p[..]),
        15 => two == b"34" || two == b"37",
        16..=19 => (b'2'..=b'6').contains(&d[0]),
        _ => false,
    }
}

/// The Luhn check over the digits of `s` (separators ignored).
fn luhn(s: &[u8]) -> bool {
    let mut sum = 0;
    for (i, d) in s.iter().rev().filter(|c| c.is_ascii_digit()).map(|c| u32::from(c - b'0')).enumerate() {
        sum += if i % 2 == 1 { if d * 2 > 9 { d * 2 - 9 } else { d * 2 } } else { d };
    }
    sum.is_multiple_of(10)
}

/// Applies a [`RedactionConfig`]. Cheap to clone.
#[derive(Debug, Clone, Default)]
pub struct Redactor {
    fields: Vec<Vec<String>>,
    rules: Vec<Rule>,
}

impl Redactor {
    /// A redactor that changes nothing.
    pub fn none() -> Redactor {
        Redactor::default()
    }

    pub fn is_empty(&self) -> bool {
        self.fields.is_empty() && self.rules.is_empty()
    }

    /// Whether any pattern (a detector: e-mail, card number, API key, custom) finds something
    /// in `text` it would redact — the finding a leakage instrument counts.
    pub fn detects(&self, text: &str) -> bool {
        self.rules.iter().any(|r| r.text.find_iter(text).any(|m| !r.keeps(m.as_str().as_bytes())))
    }

    /// Whether any detector is configured (without one, nothing can be found).
    pub fn has_detectors(&self) -> bool {
        !self.rules.is_empty()
    }

    /// `text` with every pattern match replaced by its marker.
    pub fn text<'a>(&self, text: &'a str) -> Cow<'a, str> {
        let mut out = Cow::Borrowed(text);
        for r in &self.rules {
            if !r.text.is_match(&out) {
                continue;
            }
            let replaced = r.text.replace_all(&out, |c: &regex::Captures<'_>| {
                let m = &c[0];
                if r.keeps(m.as_bytes()) { m.to_string() } else { r.marker.clone() }
            });
            if replaced != out.as_ref() {
                out = Cow::Owned(replaced.into_owned());
            }
        }
        out
    }

    /// Raw bytes with every pattern match replaced by its marker.
    pub fn bytes<'a>(&self, bytes: &'a [u8]) -> Cow<'a, [u8]> {
        let mut out = Cow::Borrowed(bytes);
        for r in &self.rules {
            if !r.bytes.is_match(&out) {
                continue;
            }
            let replaced = r.bytes.replace_all(&out, |c: &regex::bytes::Captures<'_>| {
                let m = &c[0];
                if r.keeps(m) { m.to_vec() } else { r.marker.as_bytes().to_vec() }
            });
            if replaced.as_ref() != out.as_ref() {
                out = Cow::Owned(replaced.into_owned());
            }
        }
        out
    }

    /// Redacts a record in place (fields, then patterns over its free text); true if anything
    /// changed.
    pub fn value(&self, v: &mut Value) -> bool {
        let mut changed = false;
        for path in &self.fields {
            changed |= redact_path(v, path);
        }
        if !self.rules.is_empty() {
            changed |= self.free_text(v, false);
        }
        changed
    }

    fn free_text(&self, v: &mut Value, identifier: bool) -> bool {
        match v {
            Value::String(s) if !identifier => match self.text(s) {
                Cow::Owned(t) => {
                    *s = t;
                    true
                }
                Cow::Borrowed(_) => false,
            },
            Value::Array(a) => a.iter_mut().fold(false, |c, x| self.free_text(x, identifier) | c),
            Value::Object(o) => o.iter_mut().fold(false, |c, (k, x)| self.free_text(x, is_identifier(k)) | c),
            _ => false,
        }
    }

    /// A payload redacted: as JSON if it is JSON, as a record (written back as JSON) if it
    /// decodes as one, else by the patterns over its bytes.
    pub fn payload<'a>(&self, decoder: &Decoder, payload: &'a [u8]) -> Cow<'a, [u8]> {
        if self.is_empty() {
            return Cow::Borrowed(payload);
        }
        let structured = serde_json::from_slice::<Value>(payload)
            .ok()
            .filter(|v| v.is_object() || v.is_array())
            .or_else(|| octant_contracts::codec::decode_value(decoder, payload).ok().map(|(_, v)| v));
        match structured {
            Some(mut v) => {
                if self.value(&mut v) {
                    Cow::Owned(serde_json::to_vec(&v).expect("JSON values serialize"))
                } else {
                    Cow::Borrowed(payload)
                }
            }
            None => self.bytes(payload),
        }
    }
}

/// Keys whose strings are identifiers, not free text: patterns skip them (a run id is not an
/// e-mail address, and a 13-digit id must not turn into a card number).
fn is_identifier(key: &str) -> bool {
    key == "id" || key.ends_with("_id") || key == "config_hash" || key == "fingerprint"
}

fn redact_path(v: &mut Value, path: &[String]) -> bool {
    let Some((head, rest)) = path.split_first() else {
        if v.is_null() || v.as_str() == Some(REDACTED) {
            return false;
        }
        *v = Value::String(REDACTED.into());
        return true;
    };
    match v {
        Value::Object(o) if head == "*" => o.values_mut().fold(false, |c, x| redact_path(x, rest) | c),
        Value::Object(o) => o.get_mut(head.as_str()).is_some_and(|x| redact_path(x, rest)),
        Value::Array(a) if head == "*" => a.iter_mut().fold(false, |c, x| redact_path(x, rest) | c),
        Value::Array(a) => head.parse::<usize>().ok().and_then(|i| a.get_mut(i)).is_some_and(|x| redact_path(x, rest)),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn r() -> Redactor {
        RedactionConfig::default().build().unwrap()
    }

    #[test]
    fn patterns_replace_personal_data_in_free_text() {
        let r = r();
        assert_eq!(r.text("write to jane.doe+x@mail.example.co.uk today"), "write to [redacted:email] today");
        // A valid card number in three spellings; a 16-digit number failing Luhn stays.
        for card in ["4111111111111111", "4111 1111 1111 1111", "4111-1111-1111-1111"] {
            assert_eq!(r.text(&format!("card {card}.")), "card [redacted:card_number].", "{card}");
        }
        assert_eq!(r.text("order 4111111111111112"), "order 4111111111111112");
        // What the text redacts, and only that, is a finding.
        assert!(r.detects(r#"{"to": "jane.doe@mail.example.com"}"#) && r.detects("card 4111 1111 1111 1111"));
        assert!(!r.detects("order 4111111111111112") && !r.detects(r#"{"target": "item-42"}"#));
        assert!(!Redactor::none().detects("jane.doe@mail.example.com") && !Redactor::none().has_detectors());
        assert_eq!(r.text("at 1764590000000 ms"), "at 1764590000000 ms", "a timestamp failing Luhn stays");
        // Epoch timestamps that pass Luhn (one in ten) are not card-shaped: they stay.
        for t in ["1764590000006", "1764590000000004", "1764590000000000006"] {
            assert!(luhn(t.as_bytes()), "{t} passes Luhn");
            assert_eq!(r.text(&format!("event time {t} is late")), format!("event time {t} is late"), "{t}");
        }
        // Every card shape still goes: Visa 13 and 19, Amex 15, Diners 14, Mastercard 2-series.
        for card in ["4222222222222", "378282246310005", "30569309025904", "2223000048400011", "4000000000000000006"] {
            assert!(luhn(card.as_bytes()), "{card} passes Luhn");
            assert_eq!(r.text(&format!("card {card}.")), "card [redacted:card_number].", "{card}");
        }
        for key in [
            "sk-proj-abcdefghijklmnopQRST1234",
            "AKIAIOSFODNN7EXAMPLE",
            "ghp_0123456789abcdefghijABCDEFGHIJ012345",
            "xoxb-123456789012-abcdefghij",
            "AIzaSyA-abcdefghijklmnopqrstuvwxyz012345",
        ] {
            assert_eq!(r.text(&format!("use {key} now")), "use [redacted:api_key] now", "{key}");
        }
        assert_eq!(r.text(r#"{"api_key": "hunter2hunter2"}"#), r#"{"[redacted:api_key]"}"#);
        assert_eq!(r.text("password=correcthorse and more"), "[redacted:api_key] and more");
        assert_eq!(r.text("nothing here, 42 steps"), "nothing here, 42 steps");
        assert!(matches!(r.text("nothing"), Cow::Borrowed(_)));
    }

    #[test]
    fn fields_are_replaced_whole_and_identifiers_keep_their_text() {
        let r =
            RedactionConfig { fields: vec!["/step/arguments".into(), "/run_ended/evaluations/*/explanation".into()], ..Default::default() }
                .build()
                .unwrap();
        let mut v = json!({
            "run_id": "run-a@b.example",
            "step": {"arguments": "{\"city\": \"Paris\"}", "violations": ["mailed x@y.example"]},
            "intervention": {"detail": "card 4111 1111 1111 1111"},
            "run_ended": {"evaluations": [{"explanation": "fine"}, {"explanation": null}]},
        });
        assert!(r.value(&mut v));
        assert_eq!(
            v,
            json!({
                "run_id": "run-a@b.example",
                "step": {"arguments": "[redacted]", "violations": ["mailed [redacted:email]"]},
                "intervention": {"detail": "card [redacted:card_number]"},
                "run_ended": {"evaluations": [{"explanation": "[redacted]"}, {"explanation": null}]},
            })
        );
        assert!(!r.value(&mut v), "redacting twice changes nothing");
    }

    #[test]
    fn payloads_are_redacted_as_json_as_records_or_as_bytes() {
        let r = r();
        let d = Decoder::new();
        let json = br#"{"step": {"arguments": "x", "violations": ["to a@b.example"]}}"#;
        let out: Value = serde_json::from_slice(&r.payload(&d, json)).unwrap();
        assert_eq!(out, json!({"step": {"arguments": "[redacted]", "violations": ["to [redacted:email]"]}}));
        let garbage = b"\x00\xffnot json a@b.example \x01";
        assert_eq!(r.payload(&d, garbage).as_ref(), b"\x00\xffnot json [redacted:email] \x01");
        assert!(matches!(r.payload(&d, b"plain"), Cow::Borrowed(_)));
        assert!(matches!(Redactor::none().payload(&d, json), Cow::Borrowed(_)));
    }

    #[test]
    fn configuration_errors_name_the_entry() {
        let e = RedactionConfig { fields: vec!["step.arguments".into()], ..Default::default() }.build().unwrap_err();
        assert!(e.contains("step.arguments"), "{e}");
        let e = RedactionConfig { patterns: vec!["phone".into()], ..Default::default() }.build().unwrap_err();
        assert!(e.contains("phone") && e.contains("custom"), "{e}");
        let e = RedactionConfig { custom: vec![CustomPattern { name: "x".into(), regex: "(".into() }], ..Default::default() }
            .build()
            .unwrap_err();
        assert!(e.contains("\"x\""), "{e}");
    }
}
