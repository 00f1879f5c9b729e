//! A real Prometheus (Debian's `prometheus`, installed by `scripts/setup.sh`) started on a
//! loopback port, scraping the given targets every second and loading the repository's rule
//! files, with its HTTP query API.

use std::net::SocketAddr;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use octant_runtime::broker::free_port;
use serde_json::Value;

use crate::alertmanager::TempDir;

pub struct Prometheus {
    child: Child,
    pub addr: SocketAddr,
    _dir: TempDir,
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The Prometheus binary, or a message that says how to install it.
pub fn locate() -> std::path::PathBuf {
    for p in [std::env::var("OCTANT_PROMETHEUS").unwrap_or_default().as_str(), "/usr/bin/prometheus"] {
        if !p.is_empty() && Path::new(p).exists() {
            return p.into();
        }
    }
    panic!("Prometheus not found (set OCTANT_PROMETHEUS, or run scripts/setup.sh, which installs Debian's prometheus)")
}

/// Percent-encodes a query parameter.
pub fn encode(s: &str) -> String {
    s.bytes()
        .map(|b| if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) { (b as char).to_string() } else { format!("%{b:02X}") })
        .collect()
}

impl Prometheus {
    /// Scrapes `targets` (job name → address) every second; loads `rule_files` (absolute).
    pub async fn start(targets: &[(&str, SocketAddr)], rule_files: &[std::path::PathBuf]) -> Prometheus {
        let bin = locate();
        let dir = std::env::temp_dir().join(format!("octant-prom-{}-{}", std::process::id(), free_port()));
        std::fs::create_dir_all(&dir).unwrap();
        let mut config = String::from("global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\nrule_files:\n");
        for r in rule_files {
            config.push_str(&format!("  - '{}'\n", r.display()));
        }
        config.push_str("scrape_configs:\n");
        for (job, addr) in targets {
            config.push_str(&format!("  - job_name: '{job}'\n    static_configs:\n      - targets: ['{addr}']\n"));
        }
        std::fs::write(dir.join("prometheus.yml"), config).unwrap();
        let port = free_port();
        let mut cmd = Command::new(bin);
        cmd.arg(format!("--config.file={}", dir.join("prometheus.yml").display()))
            .arg(format!("--storage.tsdb.path={}", dir.join("data").display()))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"));
        cmd.stdout(Stdio::null()).stderr(Stdio::null());
        let child = crate::spawn_child(cmd);
        let addr: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
        let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
        loop {
            if crate::alertmanager::http_get(port, "/-/ready").await.is_some_and(|(c, _)| c == 200) {
                break;
            }
            assert!(tokio::time::Instant::now() < deadline, "Prometheus did not become ready on {addr}");
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        Prometheus { child, addr, _dir: TempDir(dir) }
    }

    /// An instant query: the `data.result` array (panics on an API error, with the message).
    pub async fn query(&self, expr: &str) -> Vec<Value> {
        let (code, body) = crate::alertmanager::http_get(self.addr.port(), &format!("/api/v1/query?query={}", encode(expr)))
            .await
            .expect("Prometheus answers");
        let v: Value = serde_json::from_str(&body).unwrap_or_else(|e| panic!("{expr}: {e}: {body}"));
        assert_eq!((code, v["status"].as_str()), (200, Some("success")), "{expr}: {body}");
        v["data"]["result"].as_array().cloned().unwrap_or_default()
    }

    /// `GET path` on the API, as JSON.
    pub async fn api(&self, path: &str) -> Value {
        let (_, body) = crate::alertmanager::http_get(self.addr.port(), path).await.expect("Prometheus answers");
        serde_json::from_str(&body).unwrap()
    }
}
