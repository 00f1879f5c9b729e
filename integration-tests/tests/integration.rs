//! Octant's integration tests, one binary: every test talks to a real Kafka-protocol broker
//! over TCP (tansu started per test, or the cluster named by `OCTANT_BROKERS`).

mod aggregator;
mod alerter;
mod compare;
mod ingest;
mod lake;
mod operations;
mod privacy;
mod probe;
mod profiler;
mod reliability;
mod reruns;
mod scorer;
mod verdicts;
mod web;

/// `octant-test-service <service>`: one Octant service as its own process (configured from a
/// file given as the next argument and its `OCTANT_<SERVICE>__*` variables).
pub fn service_command(service: &str) -> std::process::Command {
    let mut c = std::process::Command::new(env!("CARGO_BIN_EXE_octant-test-service"));
    c.arg(service);
    c
}
