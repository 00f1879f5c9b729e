//! # octant-core
//!
//! Octant's evaluation model (design §1), as a pure library: no I/O, no clocks, no threads.
//! Everything that talks to Kafka, disk or HTTP depends on this crate, never the reverse.
//!
//! ## Layout
//! - [`dimension`]: the eight trustworthiness dimensions.
//! - [`catalogue`]: the metric table of design §1.4 (id, dimension, unit, family, estimator,
//!   minimum evidence, veto, description) and [`catalogue::CATALOGUE_VERSION`].
//! - [`family`]: the six normalisation families (H, L, C(B), R(B), W[lo,hi], Q) → band 0..=4.
//! - [`veto`]: veto rules and their four states (confirmed, breached, at risk, clear).
//! - [`profile`]: metric evaluation (band, band interval, N/A with reason and count) and the
//!   eight-dimension profile (aggregation, caps, voids).
//! - [`stats`]: the deterministic mergeable cluster bootstrap and the estimators (Wilson,
//!   Agresti–Coull, pass@k, pass^k, ECE, fairness gap, Cohen's κ, prediction-powered mean).
//! - [`gate`]: the two-tier gate and the Efficacy Indices EI, EI_G.
//!
//! ## Guarantees
//! - Bootstrap intervals depend only on the data and the seed (never on order or
//!   partitioning), and bootstrap states merge exactly (integer fixed-point sums).
//! - Band boundaries are exactly those of the design, edges included (see [`family`]).
//! - N/A is never 0: a metric or dimension without a band says why.

pub mod catalogue;
pub mod dimension;
pub mod family;
pub mod gate;
pub mod profile;
pub mod stats;
pub mod veto;

pub use catalogue::{CATALOGUE, CATALOGUE_VERSION, Dimension, Estimator, MetricSpec, Unit, spec};
pub use family::{Band, BandContext, Family, band_legend, band_reading};
pub use veto::{VetoRule, VetoState};
