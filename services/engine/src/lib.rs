//! # octant-engine
//!
//! The evaluation engine: what turns observations into published verdicts, written once and
//! used by the aggregator (streaming windows over Kafka) and the profiler (one window over a
//! period of the lake, merged from hourly pane sums), so a profile of a closed window's span
//! equals the aggregator's window to the bit. Pure: no I/O, no clock (threads only to share
//! independent series or replicates).
//!
//! ## Layout
//! - [`window`]: event-time window state and emission (the determinism argument lives there).
//! - [`upstream`]: the watermark, the minimum over the scorer's input partitions.
//! - [`panes`]: per-pane sums of a series and their exact merge into a period (the profiler's
//!   store; cost independent of the observation count).
//! - [`verdicts`]: emissions → `MetricWindow` and `DimensionProfile` records: one verdict per
//!   window (N/A, void, veto states with sequential evidence), made here and nowhere else.
//! - [`config`]: [`EvaluationConfig`], the `[evaluation]` section both services read (window
//!   geometry, bootstrap, budgets, profile rules).

pub mod config;
pub mod panes;
pub mod upstream;
pub mod verdicts;
pub mod window;

pub use config::{BootstrapConfig, EvaluationConfig, WindowConfig};
