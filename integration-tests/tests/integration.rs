//! Octant's integration tests, one binary: every test talks to a real Kafka-protocol broker
//! over TCP (tansu started per test, or the cluster named by `OCTANT_BROKERS`).

mod aggregator;
mod alerter;
mod ingest;
mod lake;
mod operations;
mod probe;
mod profiler;
mod scorer;
mod verdicts;
