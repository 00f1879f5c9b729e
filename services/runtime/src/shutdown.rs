//! Graceful shutdown: the first SIGTERM or Ctrl-C cancels the token (services drain: flush,
//! commit, close); a second signal, or a drain that outlasts its timeout, exits non-zero.

use std::time::Duration;

use tokio_util::sync::CancellationToken;

/// Cancels `token` on the first SIGINT/SIGTERM; exits the process with status 130 on the
/// second, or `drain_timeout` after the first.
pub fn on_signals(token: CancellationToken, drain_timeout: Duration) {
    tokio::spawn(async move {
        wait_for_signal().await;
        tracing::info!(?drain_timeout, "shutdown requested: draining (signal again to exit now)");
        token.cancel();
        tokio::select! {
            _ = wait_for_signal() => tracing::warn!("second signal: exiting without draining"),
            _ = tokio::time::sleep(drain_timeout) => tracing::error!("drain timed out"),
        }
        std::process::exit(130);
    });
}

async fn wait_for_signal() {
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).expect("SIGTERM handler");
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
}

/// Structured logs to stderr; `OCTANT_LOG` (or `RUST_LOG`) filters, `OCTANT_LOG_FORMAT=json`
/// switches to JSON lines.
pub fn init_tracing(default_filter: &str) {
    let builder = tracing_subscriber::fmt().with_env_filter(log_filter(default_filter)).with_writer(std::io::stderr);
    let _ = if std::env::var("OCTANT_LOG_FORMAT").as_deref() == Ok("json") { builder.json().try_init() } else { builder.try_init() };
}

/// Like [`init_tracing`], into a file (appended, no colours): for commands that own the
/// terminal, such as the demo's live view.
pub fn init_tracing_to_file(default_filter: &str, path: &std::path::Path) -> std::io::Result<()> {
    let file = std::fs::OpenOptions::new().create(true).append(true).open(path)?;
    let builder =
        tracing_subscriber::fmt().with_env_filter(log_filter(default_filter)).with_ansi(false).with_writer(std::sync::Mutex::new(file));
    let _ = if std::env::var("OCTANT_LOG_FORMAT").as_deref() == Ok("json") { builder.json().try_init() } else { builder.try_init() };
    Ok(())
}

/// The filter: `OCTANT_LOG`, `RUST_LOG` or the default; delta-rs's transaction module is kept
/// to errors unless the filter names delta-rs (it warns "table updated during transaction" on
/// every commit it rebases over another writer's, which is how several lake writers share a
/// table, not a fault).
fn log_filter(default_filter: &str) -> tracing_subscriber::EnvFilter {
    let mut filter =
        std::env::var("OCTANT_LOG").ok().or_else(|| std::env::var("RUST_LOG").ok()).unwrap_or_else(|| default_filter.to_string());
    if !filter.contains("deltalake") {
        filter.push_str(",deltalake_core::kernel::transaction=error");
    }
    tracing_subscriber::EnvFilter::new(filter)
}

#[cfg(test)]
mod tests {
    #[test]
    fn delta_rs_rebases_are_not_logged_as_warnings() {
        // The environment may set a filter; the directive is added either way unless it names
        // delta-rs.
        let shown = super::log_filter("info").to_string();
        if !std::env::var("OCTANT_LOG").or_else(|_| std::env::var("RUST_LOG")).is_ok_and(|f| f.contains("deltalake")) {
            assert!(shown.contains("deltalake_core::kernel::transaction=error"), "{shown}");
        }
    }
}
