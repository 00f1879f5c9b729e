//! `octant import`: evaluation harness logs in — Inspect AI eval logs (`octant import inspect
//! LOG…`) and τ-bench / τ²-bench result files (`octant import tau-bench FILE…`) — produced to
//! the evaluation topic as trajectories, once: the import ledger (`octant.imports`, see
//! `octant_import::ledger`) remembers what was sent, so importing a log again sends nothing.
//! A record a log cannot be read from is reported with its file and record and dead-lettered
//! (`service` import, `source_topic` `import:<import id>`, `offset` the record's position, key
//! its name); the rest of the log goes on. A file that is no log at all is reported and the next file goes on; the
//! command then exits 1.

use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Context;
use clap::{Args, Subcommand};
use octant_contracts::codec::to_single_object;
use octant_contracts::topics;
use octant_import::ledger::{self, Entry, Plan};
use octant_import::{Import, Options, Rater};
use octant_runtime::KafkaConfig;
use octant_runtime::dlq::{SourceRef, now_ms};
use octant_runtime::kafka::{self, OutRecord};
use octant_runtime::redact::{RedactionConfig, Redactor};

#[derive(Args, Debug)]
pub struct ImportArgs {
    #[command(subcommand)]
    pub harness: Harness,
}

#[derive(Subcommand, Debug)]
pub enum Harness {
    /// Inspect AI eval logs (.eval or .json): each sample of each epoch an evaluation run.
    Inspect {
        #[command(flatten)]
        common: Common,
        /// The scorer whose verdict is the task's success (default: the log's headline scorer,
        /// else its first).
        #[arg(long)]
        success_scorer: Option<String>,
        /// A scorer's kind beyond Inspect's built-in ones: NAME=verifier (a deterministic
        /// check) or NAME=judge (a model grading). Repeatable.
        #[arg(long = "scorer")]
        scorers: Vec<String>,
        /// The logs.
        #[arg(required = true)]
        logs: Vec<PathBuf>,
    },
    /// τ-bench result files (its historical_trajectories/ layout) and τ²-bench results.json.
    TauBench {
        #[command(flatten)]
        common: Common,
        /// τ-bench files carry no times: the event time of their first run (RFC 3339; default
        /// the file's modification time).
        #[arg(long, value_parser = humantime::parse_rfc3339_weak)]
        start: Option<std::time::SystemTime>,
        /// The files.
        #[arg(required = true)]
        files: Vec<PathBuf>,
    },
}

#[derive(Args, Debug)]
pub struct Common {
    /// Bootstrap servers.
    #[arg(long, env = "OCTANT_BROKERS")]
    pub brokers: Option<String>,
    /// Prefix of every topic name.
    #[arg(long)]
    pub topic_prefix: Option<String>,
    /// A configuration file (octant.toml): its [kafka] section (security settings) and its
    /// [redaction] section (for the dead letters) are used.
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// The system (default: the model the log names; τ-bench: the file's name).
    #[arg(long)]
    pub system: Option<String>,
    /// The system's version (default: a digest of the agent's configuration).
    #[arg(long)]
    pub version: Option<String>,
    /// The benchmark (default: the task the log names; tau-bench, tau2-bench/<domain>).
    #[arg(long)]
    pub benchmark: Option<String>,
    /// The task family (default: the dataset the log names).
    #[arg(long)]
    pub task_family: Option<String>,
    /// The benchmark's measured contamination (0–1), when one was measured.
    #[arg(long)]
    pub contamination: Option<f64>,
    /// Map and report, send nothing.
    #[arg(long)]
    pub dry_run: bool,
}

fn options(c: &Common) -> anyhow::Result<Options> {
    if let Some(x) = c.contamination {
        anyhow::ensure!((0.0..=1.0).contains(&x), "--contamination {x} must be in [0, 1]");
    }
    Ok(Options {
        system: c.system.clone(),
        version: c.version.clone(),
        benchmark: c.benchmark.clone(),
        task_family: c.task_family.clone(),
        contamination: c.contamination,
        ..Options::default()
    })
}

/// `NAME=verifier` or `NAME=judge`.
fn scorer_kind(decl: &str) -> anyhow::Result<(String, Rater)> {
    let (name, kind) = decl.split_once('=').with_context(|| format!("--scorer {decl}: give NAME=verifier or NAME=judge"))?;
    let rater = match kind {
        "verifier" => Rater::Verifier,
        "judge" => Rater::Judge,
        other => anyhow::bail!("--scorer {decl}: `{other}` is neither verifier nor judge"),
    };
    Ok((name.to_string(), rater))
}

/// A harness's reader.
type Reader = fn(&Path, &Options) -> Result<Import, octant_import::ImportError>;

pub async fn run(a: ImportArgs) -> anyhow::Result<()> {
    let (common, files, read): (_, _, Reader) = match a.harness {
        Harness::Inspect { common, success_scorer, scorers, logs } => {
            let mut opts = options(&common)?;
            opts.success_scorer = success_scorer;
            opts.scorer_kinds = scorers.iter().map(|d| scorer_kind(d)).collect::<anyhow::Result<_>>()?;
            ((common, opts), logs, octant_import::inspect::read)
        }
        Harness::TauBench { common, start, files } => {
            let mut opts = options(&common)?;
            opts.start_ms = start.and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok()).map(|d| d.as_millis() as i64);
            ((common, opts), files, octant_import::tau::read)
        }
    };
    let (common, opts) = common;
    let mut sink = if common.dry_run { None } else { Some(Sink::connect(&common).await?) };
    let mut failed = 0;
    for file in &files {
        let import = match read(file, &opts) {
            Ok(i) => i,
            Err(e) => {
                eprintln!("{e}");
                failed += 1;
                continue;
            }
        };
        for note in &import.notes {
            println!("{}: {note}", import.file);
        }
        for p in &import.problems {
            eprintln!("{}: {}: {}", import.file, p.record, p.message);
        }
        match sink.as_mut() {
            None => println!(
                "{}: {} runs, {} events, {} unreadable records (dry run: nothing sent; import id {})",
                import.file,
                import.runs.len(),
                import.events(),
                import.problems.len(),
                import.id
            ),
            Some(s) => s.import(&import).await?,
        }
    }
    anyhow::ensure!(failed == 0, "{failed} of {} files could not be imported", files.len());
    Ok(())
}

/// Where imports go: the evaluation topic, the dead-letter topic and the ledger.
struct Sink {
    kafka: KafkaConfig,
    producer: rdkafka::producer::FutureProducer,
    redactor: Redactor,
    ledger: BTreeMap<String, Entry>,
    by: Option<String>,
}

const TIMEOUT: Duration = Duration::from_secs(60);
/// Reading the topics back for an interrupted import: they may have grown a lot since.
const RESUME_TIMEOUT: Duration = Duration::from_secs(600);
/// The most a ledger entry may be (Kafka's default record limit is 1 MiB).
const MAX_ENTRY_BYTES: usize = 900 * 1024;

impl Sink {
    async fn connect(c: &Common) -> anyhow::Result<Sink> {
        let root: toml::Table = match &c.config {
            Some(p) => toml::from_str(&std::fs::read_to_string(p).with_context(|| format!("failed to read {}", p.display()))?)
                .with_context(|| format!("{} is not TOML", p.display()))?,
            None => toml::Table::new(),
        };
        let mut kafka: KafkaConfig = match root.get("kafka") {
            Some(v) => v.clone().try_into().context("invalid [kafka] section")?,
            None => KafkaConfig::default(),
        };
        if let Some(b) = &c.brokers {
            kafka.brokers = b.clone();
        }
        if let Some(p) = &c.topic_prefix {
            kafka.topic_prefix = p.clone();
        }
        anyhow::ensure!(!kafka.brokers.is_empty(), "no brokers: give --brokers (or [kafka] brokers), or --dry-run");
        let redaction: RedactionConfig = match root.get("redaction") {
            Some(v) => v.clone().try_into().context("invalid [redaction] section")?,
            None => RedactionConfig::default(),
        };
        let redactor = redaction.build().map_err(|e| anyhow::anyhow!("[redaction]: {e}"))?;
        kafka::wait_for_metadata(&kafka, Duration::from_secs(30)).await?;
        let evaluation = kafka.topic(topics::TRAJECTORIES_EVALUATION);
        kafka::partition_counts(&kafka, std::slice::from_ref(&evaluation))
            .await
            .with_context(|| format!("the evaluation topic {evaluation} (`octant topics create` makes it)"))?;
        let ledger_topic = kafka.topic(ledger::TOPIC);
        // `octant topics create` makes it with the cluster's replication; here only if missing.
        kafka::ensure_compacted_topic(&kafka, &ledger_topic, 1).await?;
        let records = octant_runtime::topic::read_to_end(&kafka, &ledger_topic, TIMEOUT).await?;
        let ledger = ledger::latest(records.into_iter().map(|r| (r.key, r.payload))).map_err(anyhow::Error::msg)?;
        let producer = kafka::producer(&kafka, "import")?;
        Ok(Sink { kafka, producer, redactor, ledger, by: std::env::var("USER").ok().filter(|u| !u.is_empty()) })
    }

    async fn write_entry(&mut self, entry: Entry) -> anyhow::Result<()> {
        let rec = OutRecord {
            topic: self.kafka.topic(ledger::TOPIC),
            partition: None,
            key: entry.import_id.clone(),
            payload: serde_json::to_vec(&entry)?,
        };
        kafka::send(&self.producer, &rec).await.context("writing the import ledger")?;
        self.ledger.insert(entry.import_id.clone(), entry);
        Ok(())
    }

    async fn import(&mut self, import: &Import) -> anyhow::Result<()> {
        let evaluation = self.kafka.topic(topics::TRAJECTORIES_EVALUATION);
        let dlq = self.kafka.topic(topics::DLQ);
        let (before, resumed) = match ledger::plan(&self.ledger, import) {
            Plan::Done { entry, changed } => {
                println!(
                    "{}: already imported ({} runs, at {}{}): nothing sent",
                    import.file,
                    entry.runs_done.len(),
                    humantime::format_rfc3339_seconds(std::time::UNIX_EPOCH + Duration::from_millis(entry.at_ms.max(0) as u64)),
                    entry.by.as_deref().map(|b| format!(" by {b}")).unwrap_or_default()
                );
                if changed {
                    println!(
                        "{}: the log changed since (rescored?): its runs stay as first imported and scored; import a new evaluation to score it again",
                        import.file
                    );
                }
                return Ok(());
            }
            Plan::Fresh => (None, None),
            Plan::Grown { entry } => {
                println!("{}: imported before with {} runs: the runs it has since are sent", import.file, entry.runs_done.len());
                (Some(entry), None)
            }
            Plan::Resume { entry } => (None, Some(entry)),
        };
        let is_resume = resumed.is_some();
        let (entry, present) = match resumed {
            // An interrupted part: what reached the topics since it began stays. Only the
            // records keyed by the part's runs and dead letters are kept from the topics.
            Some(entry) => {
                let candidates = ledger::to_send(import, Some(&entry), &HashSet::new());
                let runs: HashSet<Vec<u8>> = ledger::keys_of(&candidates.runs).into_iter().map(|k| k.as_bytes().to_vec()).collect();
                let letters: HashSet<Vec<u8>> =
                    candidates.problems.iter().map(|p| ledger::dead_letter_id(import, p).into_bytes()).collect();
                let mut present = HashSet::new();
                let decoder = octant_contracts::Decoder::new();
                for r in octant_runtime::topic::read_from_keys(&self.kafka, &evaluation, &entry.from_offsets, runs, RESUME_TIMEOUT).await? {
                    present.extend(decoder.decode::<octant_contracts::TrajectoryEvent>(&r.payload).ok().map(|e| e.event_id));
                }
                for r in octant_runtime::topic::read_from_keys(&self.kafka, &dlq, &entry.dlq_from_offsets, letters, RESUME_TIMEOUT).await? {
                    present.extend(decoder.decode::<octant_contracts::DeadLetter>(&r.payload).ok().map(|d| d.dead_letter_id));
                }
                (entry, present)
            }
            None => {
                let offsets = (
                    octant_runtime::topic::end_offsets(&self.kafka, &evaluation, TIMEOUT).await?,
                    octant_runtime::topic::end_offsets(&self.kafka, &dlq, TIMEOUT).await?,
                );
                let entry = Entry::begun(import, before.as_ref(), offsets, now_ms(), self.by.clone());
                // The entry that ends this part must fit in one record, or the part could never
                // be marked done: refused before anything is sent.
                let size = entry.size_with(&ledger::to_send(import, Some(&entry), &HashSet::new()));
                anyhow::ensure!(
                    size < MAX_ENTRY_BYTES,
                    "{}: too large for one import ({size} bytes of ledger entry, at most {MAX_ENTRY_BYTES}): split the log",
                    import.file
                );
                self.write_entry(entry.clone()).await?;
                (entry, HashSet::new())
            }
        };
        // The begun entry lists the runs done before this part: the rest go, less what is found.
        let sending = ledger::to_send(import, Some(&entry), &present);
        let planned: usize = sending.runs.iter().map(|r| r.events.len()).sum();
        if is_resume {
            println!(
                "{}: resuming an interrupted import: {} of {} events already on {evaluation}",
                import.file,
                planned - sending.events.len(),
                planned
            );
        }
        // Run by run, runs in the order they began: a run's events together, so that the
        // scorer never finds one of them idle behind newer events of another run (it would
        // abandon it); results older than the live windows are the lake's (the aggregator
        // counts them as historical).
        let events = &sending.events;
        let records: Vec<OutRecord> = events
            .iter()
            .map(|e| Ok(OutRecord { topic: evaluation.clone(), partition: None, key: e.run_id.clone(), payload: to_single_object(*e)? }))
            .collect::<anyhow::Result<_>>()?;
        kafka::send_all(&self.producer, &records).await.with_context(|| format!("sending {} to {evaluation}", import.file))?;
        // A dead letter says where the record is; the record itself stays in the file (a
        // transcript's arguments and results are not the dead-letter topic's to keep).
        let source = ledger::dead_letter_topic(import);
        let dead: Vec<OutRecord> = sending
            .dead_letters
            .iter()
            .map(|p| {
                let src = SourceRef { topic: &source, partition: -1, offset: p.index, key: Some(p.record.as_bytes()), payload: &[] };
                let message = format!("{} {}: {}", entry.file, p.record, p.message);
                octant_runtime::dlq::dead_letter("import", &dlq, &src, "malformed_record", &message, now_ms(), &self.redactor).1
            })
            .collect();
        kafka::send_all(&self.producer, &dead).await.context("sending dead letters")?;
        let done = entry.done(import, &sending, now_ms());
        let total_runs = done.runs_done.len();
        self.write_entry(done).await?;
        println!(
            "{}: {} runs, {} events sent to {evaluation}, {} dead letters ({} runs imported in all; import id {})",
            import.file,
            sending.runs.len(),
            records.len(),
            dead.len(),
            total_runs,
            import.id
        );
        Ok(())
    }
}
