//! The `octant` command against a real broker: `octant topics create` makes every topic the
//! services need (the Collector's two included), and `octant up` runs the services named, in
//! one process, from one configuration file, until SIGTERM stops them cleanly. A bad section
//! is refused by name.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use octant_runtime::broker::EmbeddedBroker;
use octant_runtime::config::KafkaConfig;

#[path = "cli/conformance.rs"]
mod conformance;
#[path = "cli/harness.rs"]
mod harness;

fn octant() -> Command {
    Command::new(env!("CARGO_BIN_EXE_octant"))
}

/// The admin addresses `octant up` prints (`running: <service> … http://<addr>/metrics`) for
/// its first `n` services; the rest of its standard error is passed on to the test's.
pub fn admin_addresses(child: &mut std::process::Child, n: usize) -> Vec<(String, std::net::SocketAddr)> {
    let mut lines = BufReader::new(child.stderr.take().expect("standard error piped")).lines();
    let mut admin = Vec::new();
    while admin.len() < n {
        let line = lines.next().expect("octant up printed what it runs").unwrap();
        if let Some(rest) = line.strip_prefix("running: ") {
            let addr = rest.split("http://").nth(1).unwrap().trim_end_matches("/metrics").to_string();
            admin.push((rest.split(' ').next().unwrap().to_string(), addr.parse().unwrap()));
        } else {
            eprintln!("{line}");
        }
    }
    std::thread::spawn(move || lines.map_while(Result::ok).for_each(|l| eprintln!("{l}")));
    admin
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn topics_create_then_up_runs_the_services() {
    let broker = EmbeddedBroker::start().await.expect("the test broker starts (run scripts/setup.sh)");
    let out =
        octant().args(["topics", "create", "--brokers", &broker.brokers, "--topic-prefix", "cli.", "--partitions", "2"]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let listed = String::from_utf8_lossy(&out.stdout).to_string();
    for t in ["cli.octant.trajectories.production", "cli.octant.observations", "cli.octant.otlp.fragments", "otlp_spans", "otlp_logs"] {
        assert!(listed.contains(t), "{t} in {listed}");
    }
    let kafka = KafkaConfig { brokers: broker.brokers.clone(), topic_prefix: "cli.".into(), ..KafkaConfig::default() };
    let counts = octant_runtime::kafka::partition_counts(&kafka, &["cli.octant.otlp.fragments".into(), "otlp_logs".into()]).await.unwrap();
    assert_eq!(counts.values().copied().collect::<Vec<_>>(), [2, 2]);

    let dir = std::env::temp_dir().join(format!("octant-cli-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let config = dir.join("octant.toml");
    std::fs::write(
        &config,
        r#"
        [kafka]
        topic_prefix = "cli."
        [evaluation.window]
        length = "10m"
        [[evaluation.instruments]]
        id = "faithfulness"
        dimension = "safety"
        family = { family = "higher" }
        [ingest]
        admin_addr = "127.0.0.1:0"
        [scorer]
        admin_addr = "127.0.0.1:0"
        [aggregator]
        admin_addr = "127.0.0.1:0"
        "#,
    )
    .unwrap();
    let mut child = octant()
        .args(["up", "--brokers", &broker.brokers, "--config", config.to_str().unwrap(), "--services", "ingest,scorer,aggregator"])
        .env("RUST_LOG", "warn")
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let admin = admin_addresses(&mut child, 3);
    assert_eq!(admin.iter().map(|(n, _)| n.as_str()).collect::<Vec<_>>(), ["ingest", "scorer", "aggregator"]);
    // Each service becomes ready (its partitions assigned).
    for (name, addr) in &admin {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let ready = std::net::TcpStream::connect(addr).ok().and_then(|mut s| {
                use std::io::{Read, Write};
                s.write_all(format!("GET /readyz HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n").as_bytes()).ok()?;
                let mut body = String::new();
                s.read_to_string(&mut body).ok()?;
                Some(body.starts_with("HTTP/1.1 200"))
            });
            if ready == Some(true) {
                break;
            }
            assert!(Instant::now() < deadline, "{name} not ready");
            std::thread::sleep(Duration::from_millis(200));
        }
    }
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let status = child.wait().unwrap();
    assert!(status.success(), "octant up stops cleanly on SIGTERM: {status:?}");

    // A misspelt setting is refused by section.
    std::fs::write(&config, "[scorer]\nidle_timeot = \"1m\"\n").unwrap();
    let out = octant().args(["up", "--brokers", &broker.brokers, "--config", config.to_str().unwrap()]).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("[scorer]") && err.contains("idle_timeot"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// SASL settings reach librdkafka: against a broker that does not speak SASL the client's
/// attempt fails, and the service says at once that it cannot reach the brokers, naming the
/// mechanism and the user, and keeps retrying — never showing the password, in the error or in
/// any log line (debug level included).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sasl_settings_are_used_and_the_password_is_never_shown() {
    let broker = EmbeddedBroker::start().await.expect("the test broker starts (run scripts/setup.sh)");
    let dir = std::env::temp_dir().join(format!("octant-cli-sasl-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let config = dir.join("octant.toml");
    let canary = "canary-sasl-91c4e";
    std::fs::write(
        &config,
        format!(
            "[kafka.settings]\n\"security.protocol\" = \"SASL_PLAINTEXT\"\n\"sasl.mechanism\" = \"PLAIN\"\n\"sasl.username\" = \"octant\"\n\"sasl.password\" = \"{canary}\"\n[scorer]\nadmin_addr = \"127.0.0.1:0\"\n"
        ),
    )
    .unwrap();
    // It says so at once and keeps retrying (until stopped), instead of waiting silently.
    let log = dir.join("stderr.log");
    let mut child = octant()
        .args(["up", "--brokers", &broker.brokers, "--config", config.to_str().unwrap(), "--services", "scorer"])
        .env("RUST_LOG", "debug")
        .env("RUST_BACKTRACE", "0")
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    while std::fs::read_to_string(&log).unwrap_or_default().matches("cannot reach the Kafka brokers").count() < 2 {
        assert!(Instant::now() < deadline, "no word of the unreachable brokers:\n{}", std::fs::read_to_string(&log).unwrap_or_default());
        std::thread::sleep(Duration::from_millis(200));
    }
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let status = child.wait().unwrap();
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(!status.success(), "it never started: {text}");
    assert!(!text.contains(canary), "the password leaked:\n{text}");
    assert!(text.contains("retrying in 5 s"), "{text}");
    assert!(text.contains("security.protocol=SASL_PLAINTEXT") && text.contains("sasl.username=octant"), "{text}");
    assert!(text.contains("sasl.password=[redacted]"), "{text}");
    let _ = std::fs::remove_dir_all(&dir);
}
