//! What the delivery design relies on from the broker, checked against the real one.

use std::time::Duration;

use octant_integration_tests::*;
use rdkafka::ClientConfig;
use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer};
use rdkafka::topic_partition_list::{Offset, TopicPartitionList};

/// The replay horizon is stored as the committed offset of a standalone companion group
/// (octant_runtime::consumer): the broker must keep offsets committed by a client that never
/// joined the group.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn broker_keeps_offsets_of_a_standalone_group() {
    let env = TestEnv::new("standalone", 1).await;
    let topic = env.topic(octant_contracts::topics::OBSERVATIONS);
    let group = format!("{}horizon", env.kafka.topic_prefix);
    let client = || -> BaseConsumer {
        ClientConfig::new()
            .set("bootstrap.servers", &env.kafka.brokers)
            .set("group.id", &group)
            .set("enable.auto.commit", "false")
            .create()
            .unwrap()
    };
    let mut tpl = TopicPartitionList::new();
    tpl.add_partition_offset(&topic, 0, Offset::Offset(42)).unwrap();
    client().commit(&tpl, CommitMode::Sync).unwrap();
    let mut q = TopicPartitionList::new();
    q.add_partition(&topic, 0);
    let got = client().committed_offsets(q, Duration::from_secs(10)).unwrap();
    assert_eq!(got.elements()[0].offset(), Offset::Offset(42));
}
