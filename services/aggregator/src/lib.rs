//! # octant-aggregator
//!
//! Observations in; event-time windows with bootstrap intervals, bands and the rolling
//! eight-dimension profile out. See [`window`] for the windowing model and its determinism.

pub mod window;
