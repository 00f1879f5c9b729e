//! # octant-runtime
//!
//! Plumbing shared by every Octant service, written once:
//! - [`config`]: TOML + environment overrides; [`config::KafkaConfig`] with secrets hidden
//!   from `Debug`.
//! - [`kafka`]: client configuration, the idempotent producer, awaited delivery, topics.
//! - [`consumer`]: the at-least-once group consumer — offsets committed only behind
//!   acknowledged outputs and service holds, with a replay horizon in the commit metadata;
//!   commit on revocation; consumer lag from librdkafka statistics.
//! - [`dlq`]: dead-letter records.
//! - [`admin`]: `/metrics`, `/healthz`, `/readyz`.
//! - [`shutdown`]: signals → cancellation token → drain; tracing set-up.
//! - [`broker`]: the embedded Kafka-protocol broker (tansu, a child process) for the demo
//!   and the tests.

pub mod admin;
pub mod broker;
pub mod config;
pub mod consumer;
pub mod dlq;
pub mod error;
pub mod kafka;
pub mod pipeline;
pub mod shutdown;

pub use config::KafkaConfig;
pub use error::RuntimeError;
