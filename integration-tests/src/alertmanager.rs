//! A real Alertmanager (Debian's `prometheus-alertmanager`, installed by `scripts/setup.sh`)
//! started on a loopback port, routing everything to a webhook this process serves, so a test
//! sees both what Alertmanager holds (`GET /api/v2/alerts`) and what it notifies (firing and
//! resolved).

use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use octant_runtime::broker::free_port;
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

pub struct Alertmanager {
    child: Child,
    pub url: String,
    _dir: TempDir,
    /// Every alert of every webhook notification received, in order.
    pub notified: Arc<Mutex<Vec<Value>>>,
}

/// A directory removed on drop.
pub struct TempDir(pub std::path::PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The Alertmanager binary, or a message that says how to install it.
pub fn locate() -> std::path::PathBuf {
    for p in
        [std::env::var("OCTANT_ALERTMANAGER").unwrap_or_default().as_str(), "/usr/bin/prometheus-alertmanager", "/usr/bin/alertmanager"]
    {
        if !p.is_empty() && std::path::Path::new(p).exists() {
            return p.into();
        }
    }
    panic!("Alertmanager not found (set OCTANT_ALERTMANAGER, or run scripts/setup.sh, which installs Debian's prometheus-alertmanager)")
}

impl Alertmanager {
    pub async fn start() -> Alertmanager {
        let bin = locate();
        let notified = Arc::new(Mutex::new(Vec::new()));
        let hook = webhook(notified.clone()).await;
        let dir = std::env::temp_dir().join(format!("octant-am-{}-{}", std::process::id(), free_port()));
        std::fs::create_dir_all(&dir).unwrap();
        let config = format!(
            "route:\n  receiver: hook\n  group_by: ['alertname', 'system', 'severity']\n  group_wait: 0s\n  group_interval: 1s\n  repeat_interval: 1h\nreceivers:\n  - name: hook\n    webhook_configs:\n      - url: 'http://{hook}/'\n        send_resolved: true\n"
        );
        std::fs::write(dir.join("alertmanager.yml"), config).unwrap();
        let port = free_port();
        let mut cmd = Command::new(bin);
        cmd.arg(format!("--config.file={}", dir.join("alertmanager.yml").display()))
            .arg(format!("--storage.path={}", dir.join("data").display()))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .arg("--cluster.listen-address=");
        cmd.stdout(Stdio::null()).stderr(Stdio::null());
        let child = crate::spawn_child(cmd);
        let url = format!("http://127.0.0.1:{port}");
        let am = Alertmanager { child, url, _dir: TempDir(dir), notified };
        let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
        while http_get(port, "/-/ready").await.map(|(s, _)| s) != Some(200) {
            assert!(tokio::time::Instant::now() < deadline, "Alertmanager did not become ready on port {port}");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        am
    }

    pub fn port(&self) -> u16 {
        self.url.rsplit(':').next().unwrap().parse().unwrap()
    }

    /// `GET /api/v2/alerts`: the alerts Alertmanager holds (active ones).
    pub async fn alerts(&self) -> Vec<Value> {
        let (status, body) = http_get(self.port(), "/api/v2/alerts").await.expect("Alertmanager reachable");
        assert_eq!(status, 200, "{body}");
        serde_json::from_str::<Value>(&body).unwrap().as_array().cloned().unwrap_or_default()
    }

    /// Stops Alertmanager (SIGSTOP) so deliveries fail; [`Self::resume`] continues it.
    pub fn pause(&self) {
        unsafe { libc::kill(self.child.id() as i32, libc::SIGSTOP) };
    }

    pub fn resume(&self) {
        unsafe { libc::kill(self.child.id() as i32, libc::SIGCONT) };
    }
}

impl Drop for Alertmanager {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A minimal HTTP/1.1 GET over loopback: (status, body).
pub async fn http_get(port: u16, path: &str) -> Option<(u16, String)> {
    let mut s = tokio::net::TcpStream::connect(("127.0.0.1", port)).await.ok()?;
    s.write_all(format!("GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n").as_bytes()).await.ok()?;
    let mut raw = Vec::new();
    tokio::time::timeout(Duration::from_secs(5), s.read_to_end(&mut raw)).await.ok()?.ok()?;
    let text = String::from_utf8_lossy(&raw).to_string();
    let status = text.split_whitespace().nth(1)?.parse().ok()?;
    let (head, body) = text.split_once("\r\n\r\n")?;
    let body = if head.to_ascii_lowercase().contains("transfer-encoding: chunked") { dechunk(body) } else { body.to_string() };
    Some((status, body))
}

fn dechunk(mut s: &str) -> String {
    let mut out = String::new();
    while let Some((len, rest)) = s.split_once("\r\n") {
        let n = usize::from_str_radix(len.trim(), 16).unwrap_or(0);
        if n == 0 || rest.len() < n {
            break;
        }
        out.push_str(&rest[..n]);
        s = rest[n..].trim_start_matches("\r\n");
    }
    out
}

/// Serves webhook POSTs on a free loopback port; pushes every alert of every notification
/// (with the notification's status) into `sink`. Returns the address.
async fn webhook(sink: Arc<Mutex<Vec<Value>>>) -> std::net::SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        loop {
            let Ok((mut s, _)) = listener.accept().await else { return };
            let sink = sink.clone();
            tokio::spawn(async move {
                let mut buf = Vec::new();
                let mut chunk = [0u8; 8192];
                loop {
                    let Ok(n) = s.read(&mut chunk).await else { return };
                    if n == 0 {
                        return;
                    }
                    buf.extend_from_slice(&chunk[..n]);
                    let text = String::from_utf8_lossy(&buf).to_string();
                    let Some((head, body)) = text.split_once("\r\n\r\n") else { continue };
                    let len: usize = head
                        .lines()
                        .find_map(|l| l.to_ascii_lowercase().strip_prefix("content-length:").map(|v| v.trim().parse().unwrap_or(0)))
                        .unwrap_or(0);
                    if body.len() < len {
                        continue;
                    }
                    if let Ok(v) = serde_json::from_str::<Value>(&body[..len]) {
                        for a in v["alerts"].as_array().cloned().unwrap_or_default() {
                            sink.lock().unwrap().push(a);
                        }
                    }
                    let _ = s.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n").await;
                    return;
                }
            });
        }
    });
    addr
}
