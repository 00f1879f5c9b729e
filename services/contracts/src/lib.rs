//! # octant-contracts
//!
//! The wire contracts of every Octant topic. The Avro schemas in `schemas/` are the source
//! of truth (design §3); this crate embeds them (current and every released version), holds
//! the Rust types that follow them ([`types`]), and the codecs ([`codec`]): Avro binary,
//! single-object encoding, the Confluent framing and JSON. Outputs are Avro single-object;
//! inputs may be any of the three framings.
//!
//! ## Topics and their records
//! | topic | record | key |
//! |---|---|---|
//! | `octant.trajectories.production`, `octant.trajectories.evaluation` | [`TrajectoryEvent`] | run id |
//! | `octant.observations` | [`Observation`], and [`Watermark`] to every partition | system id (watermarks: upstream topic/partition) |
//! | `octant.windows` | [`MetricWindow`] and [`DimensionProfile`] | system id |
//! | `octant.alerts` | [`Alert`] | fingerprint |
//! | `octant.profiles` | [`Profile`] | system id |
//! | `octant.dlq` | [`DeadLetter`] | source topic/partition/offset |
//! | `octant.reruns` | [`ReRunRequest`] | the run to re-execute |
//!
//! ## Evolution
//! A released schema version is copied to `schemas/released/<version>/` with a sample datum
//! written by it. `tests/contracts.rs` fails when the current schema can no longer read a
//! released version's data (Avro schema resolution), so a breaking change is caught before it
//! ships. No I/O here.

pub mod canonical;
pub mod codec;
pub mod types;

/// Which settings hold secrets: the one list the Kafka client's and the object store's
/// redaction share (here, in the crate every other depends on, so the lake need not depend on
/// the Kafka runtime for it).
pub mod secrets {
    /// True for librdkafka and object-store keys whose values are secrets.
    pub fn is_secret_key(key: &str) -> bool {
        let k = key.to_ascii_lowercase();
        ["password", "secret", "token", "ssl.key.pem", "ssl.keystore", "sasl.oauthbearer.config", "credential"]
            .iter()
            .any(|s| k.contains(s))
    }
}

pub use codec::{Contract, DecodeError, Decoder, EncodeError, FingerprintKind, Framing};
pub use types::*;

/// Topic names (design §2).
pub mod topics {
    pub const TRAJECTORIES_PRODUCTION: &str = "octant.trajectories.production";
    pub const TRAJECTORIES_EVALUATION: &str = "octant.trajectories.evaluation";
    pub const OBSERVATIONS: &str = "octant.observations";
    pub const WINDOWS: &str = "octant.windows";
    pub const ALERTS: &str = "octant.alerts";
    pub const PROFILES: &str = "octant.profiles";
    pub const DLQ: &str = "octant.dlq";
    /// The ingest's own topic: OTLP pieces re-keyed by trace id (not archived in the lake).
    pub const OTLP_FRAGMENTS: &str = "octant.otlp.fragments";
    /// Re-run requests (seed 000 §IV-G) for the harnesses that own the runs.
    pub const RERUNS: &str = "octant.reruns";
    /// Every Octant topic (what the lake writer archives).
    pub const ALL: [&str; 8] = [TRAJECTORIES_PRODUCTION, TRAJECTORIES_EVALUATION, OBSERVATIONS, WINDOWS, ALERTS, PROFILES, DLQ, RERUNS];
}
