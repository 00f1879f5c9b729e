//! Estimators (design §1.5). All pure functions of their inputs; the bootstrap is
//! deterministic and mergeable, so streaming windows and batch profiles agree.

pub mod agreement;
pub mod bootstrap;
pub mod calibration;
pub mod canary;
pub mod fairness;
pub mod lanes;
pub mod meta;
pub mod paired;
pub mod passk;
pub mod ppi;
pub mod proportion;
pub mod sequential;

pub use bootstrap::{BootstrapSpec, Estimate, LaneSums, ReplicateSums, cluster_hash, ratio, to_fixed};
