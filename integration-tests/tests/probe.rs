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

/// A companion value is read back with the offset it was computed for, whichever step of a
/// commit a crash cuts (octant_runtime::consumer::CompanionStore), on the real broker: each
/// read is a new store, as a new owner after a crash would make.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cut_commit_leaves_a_matching_companion_pair() {
    use octant_runtime::consumer::{CommitPoint, CompanionStore, Resumption, TopicPartition};
    let env = TestEnv::new("pairs", 2).await;
    let topic = env.topic(octant_contracts::topics::OBSERVATIONS);
    let group = format!("{}pairs", env.kafka.topic_prefix);
    let kafka = env.kafka.clone();
    tokio::task::spawn_blocking(move || {
        let store = || CompanionStore::new(&kafka, "test", &group).unwrap();
        let (p0, p1) = (TopicPartition::new(&topic, 0), TopicPartition::new(&topic, 1));
        let point = |offset, companion| CommitPoint { offset, companion };
        let read = |tp: &TopicPartition| {
            let r = store().read(tp).unwrap();
            (r.offset, r.companion)
        };
        assert_eq!(store().read(&p0).unwrap(), Resumption::default(), "nothing stored yet");

        let owner = store();
        owner.write(&[(p0.clone(), point(10, 100)), (p1.clone(), point(0, 7))], |_| true, |_| Ok(())).unwrap();
        assert_eq!(read(&p0), (Some(10), Some(100)));
        assert_eq!(read(&p1), (Some(0), Some(7)), "offset 0 is stored as an offset, not as nothing");
        // A crash after the values: the old pair and its value.
        owner.write_interrupted(&[(p0.clone(), point(20, 200))], 1).unwrap();
        assert_eq!(read(&p0), (Some(10), Some(100)), "the new value went into the slot the pair does not point at");
        // A crash after the pairs: the new pair and its value (the group offset is older).
        owner.write_interrupted(&[(p0.clone(), point(20, 200))], 2).unwrap();
        assert_eq!(read(&p0), (Some(20), Some(200)));
        // A new owner writes on from what it read, and is cut again after the values.
        let next = store();
        assert_eq!(next.read(&p0).unwrap().offset, Some(20));
        next.write_interrupted(&[(p0.clone(), point(30, 300))], 1).unwrap();
        assert_eq!(read(&p0), (Some(20), Some(200)));
        // A third owner that never read: finds the slot itself.
        store().write(&[(p0.clone(), point(40, 400))], |_| true, |_| Ok(())).unwrap();
        assert_eq!(read(&p0), (Some(40), Some(400)));
        assert_eq!(read(&p1), (Some(0), Some(7)), "another partition's pair is untouched");
        // A failing group-offset commit after the pairs: the pairs stand.
        let failing = store();
        let cut = || Err(octant_runtime::error::RuntimeError::Config("cut".into()));
        assert!(failing.write(&[(p0.clone(), point(50, 500))], |_| true, |_| cut()).is_err());
        // A partition this instance no longer owns: nothing is written for it.
        store()
            .write(
                &[(p1.clone(), point(99, 999))],
                |tp| tp != &p1,
                |written| {
                    assert!(written.is_empty());
                    Ok(())
                },
            )
            .unwrap();
        assert_eq!(read(&p1), (Some(0), Some(7)));
        assert_eq!(read(&p0), (Some(50), Some(500)));
        failing.write(&[(p0.clone(), point(60, 600))], |_| true, |_| Ok(())).unwrap();
        assert_eq!(read(&p0), (Some(60), Some(600)));
    })
    .await
    .unwrap();
}

/// What a stage saw: where each partition opened (offset, companion value), and every offset
/// it processed.
#[derive(Default)]
struct Seen {
    opened: Vec<(i64, Option<i64>)>,
    processed: Vec<i64>,
}

/// A stage that records what the loop hands it and produces nothing.
struct Recorder(std::sync::Arc<std::sync::Mutex<Seen>>);

impl octant_runtime::pipeline::Stage for Recorder {
    type Partition = ();
    type Tag = ();

    fn open(&mut self, _tp: &octant_runtime::consumer::TopicPartition, offset: i64, companion: Option<i64>) -> anyhow::Result<()> {
        self.0.lock().unwrap().opened.push((offset, companion));
        Ok(())
    }

    fn process(
        &mut self,
        _part: &mut (),
        _offsets: &mut octant_runtime::consumer::PartitionOffsets,
        msg: &octant_runtime::pipeline::InMessage<'_>,
    ) -> (Vec<octant_runtime::kafka::OutRecord>, ()) {
        self.0.lock().unwrap().processed.push(msg.offset);
        (Vec::new(), ())
    }

    fn acked(&mut self, _tag: (), _latency: Duration) {}

    fn commit_point(
        &mut self,
        _part: &mut (),
        offsets: &octant_runtime::consumer::PartitionOffsets,
    ) -> Option<octant_runtime::consumer::CommitPoint> {
        Some(octant_runtime::consumer::CommitPoint { offset: offsets.commit_offset()?, companion: offsets.horizon()? + 1 })
    }
}

/// A previous owner's commit cut after its companion pair (the group's offset not stored):
/// the stage loop opens the partition at the pair's offset with the pair's value, and never
/// hands the stage what it reads before that offset; its own commits then go on from there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_owner_resumes_at_the_offset_its_companion_value_goes_with() {
    use octant_runtime::consumer::{CommitPoint, CompanionStore, TopicPartition, group_consumer, lag_gauge};
    use octant_runtime::pipeline;
    let env = TestEnv::new("resume", 1).await;
    let topic = env.topic(octant_contracts::topics::OBSERVATIONS);
    let group = format!("{}resume", env.kafka.topic_prefix);
    let producer = octant_runtime::kafka::producer(&env.kafka, "test").unwrap();
    for i in 0..10 {
        let rec = octant_runtime::kafka::OutRecord { topic: topic.clone(), partition: Some(0), key: "k".into(), payload: vec![i] };
        octant_runtime::kafka::send(&producer, &rec).await.unwrap();
    }
    let tp = TopicPartition::new(&topic, 0);
    {
        let (kafka, group, tp) = (env.kafka.clone(), group.clone(), tp.clone());
        tokio::task::spawn_blocking(move || {
            CompanionStore::new(&kafka, "test", &group)
                .unwrap()
                .write_interrupted(&[(tp, CommitPoint { offset: 6, companion: 66 })], 2)
                .unwrap()
        })
        .await
        .unwrap();
    }
    let run = |want: usize| {
        let (kafka, group, topic) = (env.kafka.clone(), group.clone(), topic.clone());
        async move {
            let seen = std::sync::Arc::new(std::sync::Mutex::new(Seen::default()));
            let (consumer, shared) =
                group_consumer(&kafka, "test", &group, &[&topic], lag_gauge(&prometheus::Registry::new(), "test")).unwrap();
            let producer = pipeline::producer(&kafka, "test").unwrap();
            let shutdown = tokio_util::sync::CancellationToken::new();
            let cfg = pipeline::LoopConfig { commit_interval: Duration::from_millis(200), max_inflight: pipeline::default_max_inflight() };
            let task = tokio::spawn(pipeline::run(
                Recorder(seen.clone()),
                consumer,
                shared,
                producer,
                octant_runtime::admin::Health::new(),
                cfg,
                shutdown.clone(),
            ));
            let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
            while seen.lock().unwrap().processed.len() < want {
                assert!(tokio::time::Instant::now() < deadline, "the stage did not get {want} messages");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
            shutdown.cancel();
            task.await.unwrap().unwrap();
            let s = seen.lock().unwrap();
            (s.opened.clone(), s.processed.clone())
        }
    };
    let (opened, processed) = run(4).await;
    assert_eq!(opened, vec![(6, Some(66))], "opened at the pair's offset with its value");
    assert_eq!(processed, vec![6, 7, 8, 9], "offsets 0..6 were the previous owner's");
    // The next owner: resumes after everything, with this owner's horizon + 1 (its final commit).
    for i in 10..12 {
        let rec = octant_runtime::kafka::OutRecord { topic: topic.clone(), partition: Some(0), key: "k".into(), payload: vec![i] };
        octant_runtime::kafka::send(&producer, &rec).await.unwrap();
    }
    let (opened, processed) = run(2).await;
    assert_eq!(opened, vec![(10, Some(10))]);
    assert_eq!(processed, vec![10, 11]);
}
