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
//! - [`redact`]: personal data and secrets out of the lake, dead letters, alerts and logs.
//! - [`admin`]: `/metrics`, `/healthz`, `/readyz`, and the one HTTP server (timeouts, a body
//!   limit, a connection cap) every service's routes are served by.
//! - [`access`]: users, roles and bearer tokens of the HTTP APIs, wrong tokens throttled.
//! - [`shutdown`]: signals → cancellation token → drain; tracing set-up.
//! - [`broker`]: the embedded Kafka-protocol broker (tansu, a child process) for the demo
//!   and the tests.
//! - [`pipeline`]: the consume → process → produce → commit loop, the [`pipeline::Stage`] a
//!   service plugs into it, and the in-process [`pipeline::Driver`] that runs a stage without a
//!   broker.
//! - [`service`]: a service's identity, the settings every streaming service shares, the
//!   admin server at start-up, the handle a started service returns, the binaries' `main`.
//! - [`supervisor`]: tasks that stop together when one fails.
//! - [`topic`]: reading a topic to its end.

pub mod access;
pub mod admin;
pub mod broker;
pub mod config;
pub mod consumer;
pub mod dlq;
pub mod error;
pub mod golden;
pub mod kafka;
pub mod metrics;
pub mod pipeline;
pub mod redact;
pub mod service;
pub mod shutdown;
pub mod supervisor;
pub mod topic;
pub mod web;

pub use config::KafkaConfig;
pub use error::RuntimeError;
/// The allocator every Octant binary and bench declares (`#[global_allocator] static ALLOC:
/// octant_runtime::Allocator = octant_runtime::Allocator;`): a stage allocates a few small
/// strings and buffers per record, and with glibc's malloc a third of the scorer's time went
/// to `malloc`/`free` (BENCHMARKS.md, issue 16). Test binaries keep the system allocator.
pub use mimalloc::MiMalloc as Allocator;
