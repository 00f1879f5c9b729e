//! Dead letters: a record that cannot be processed becomes a [`DeadLetter`] on `octant.dlq`
//! with its source topic, partition, offset, key, verbatim payload, error class and message.
//! The dead letter's id is deterministic (service/topic/partition/offset), so a replay
//! produces the same id. A payload over [`MAX_DEAD_LETTER_PAYLOAD`] (an oversized record) is
//! kept to that many bytes and the message says so: the dead letter itself must stay within
//! the input limit every reader applies (`octant_contracts::codec::MAX_RECORD_BYTES`).
//! Personal data and secrets are redacted from the payload, the key and the message first
//! ([`crate::redact`]); the message says when the payload was.

use octant_contracts::DeadLetter;
use octant_contracts::codec::to_single_object;

use crate::kafka::OutRecord;
use crate::redact::Redactor;

/// Where a record came from.
#[derive(Debug, Clone)]
pub struct SourceRef<'a> {
    pub topic: &'a str,
    pub partition: i32,
    pub offset: i64,
    pub key: Option<&'a [u8]>,
    pub payload: &'a [u8],
}

/// The most of a payload a dead letter carries (half the input limit).
pub const MAX_DEAD_LETTER_PAYLOAD: usize = octant_contracts::codec::MAX_RECORD_BYTES / 2;

/// Builds the dead letter and its output record for the dead-letter topic `dlq_topic`, redacted
/// by `redactor`.
pub fn dead_letter(
    service: &str,
    dlq_topic: &str,
    src: &SourceRef<'_>,
    class: &str,
    message: &str,
    now_ms: i64,
    redactor: &Redactor,
) -> (DeadLetter, OutRecord) {
    let id = format!("{service}/{}/{}/{}", src.topic, src.partition, src.offset);
    let payload = redactor.payload(&octant_contracts::Decoder::new(), src.payload);
    let mut error_message = redactor.text(message).into_owned();
    if payload.as_ref() != src.payload {
        error_message.push_str(" (payload redacted)");
    }
    if payload.len() > MAX_DEAD_LETTER_PAYLOAD {
        error_message.push_str(&format!(" (payload kept to its first {MAX_DEAD_LETTER_PAYLOAD} of {} bytes)", payload.len()));
    }
    let dl = DeadLetter {
        dead_letter_id: id.clone(),
        service: service.to_string(),
        source_topic: src.topic.to_string(),
        partition: src.partition,
        offset: src.offset,
        key: src.key.map(|k| redactor.bytes(k).into_owned()),
        payload: payload[..payload.len().min(MAX_DEAD_LETTER_PAYLOAD)].to_vec(),
        error_class: class.to_string(),
        error_message,
        failed_at: now_ms,
    };
    let payload = to_single_object(&dl).expect("dead letters always encode");
    (dl, OutRecord { partition: None, topic: dlq_topic.to_string(), key: id, payload })
}

/// A stage's dead letters, written once: the service, its dead-letter topic and its redactor.
#[derive(Debug, Clone)]
pub struct DeadLetters {
    service: &'static str,
    topic: String,
    redactor: Redactor,
}

impl DeadLetters {
    pub fn new(service: &'static str, topic: String, redactor: Redactor) -> DeadLetters {
        DeadLetters { service, topic, redactor }
    }

    /// The dead-letter record of the record `src`, of error `class`, logged at debug level
    /// with where it came from.
    pub fn of(&self, src: &SourceRef<'_>, class: &str, message: &str) -> OutRecord {
        let (dl, record) = dead_letter(self.service, &self.topic, src, class, message, now_ms(), &self.redactor);
        tracing::debug!(topic = src.topic, partition = src.partition, offset = src.offset, class, message = %dl.error_message, "dead letter");
        record
    }

    /// The dead-letter record of the message `m`.
    pub fn message(&self, m: &crate::pipeline::InMessage<'_>, class: &str, message: &str) -> OutRecord {
        self.of(&SourceRef { topic: m.topic, partition: m.partition, offset: m.offset, key: m.key, payload: m.payload }, class, message)
    }
}

/// Milliseconds since the epoch (wall clock), for `failed_at` stamps.
pub fn now_ms() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_millis() as i64).unwrap_or(0)
}
