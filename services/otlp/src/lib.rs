//! # octant-otlp
//!
//! OpenTelemetry in, Octant trajectories out — pure (no I/O, no clock):
//! - [`proto`]: the OTLP protobuf messages Octant reads (hand-written prost messages);
//! - [`json`]: OTLP/JSON into the same messages;
//! - [`model`]: requests flattened into spans and log records with their resources;
//! - [`fragment`]: requests split per trace and the ingest topic's record format;
//! - [`genai`]: a trace of GenAI spans and events → one run of `TrajectoryEvent`s;
//! - [`mapping`]: what the conventions do not say, declared in configuration;
//! - [`approvals`]: what a trace shows of its approval flow (rules over what it emits).
//!
//! The ingest service (`octant-ingest`) runs them against Kafka.

pub mod approvals;
pub mod fragment;
pub mod genai;
pub mod json;
pub mod mapping;
pub mod model;
pub mod proto;

pub use mapping::Mapping;
pub use model::{DecodeError, Encoding};

#[cfg(test)]
mod tests;
