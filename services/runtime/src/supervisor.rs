//! Tasks that live and die together: when one ends with an error (or panics), every other is
//! told to stop (the shared shutdown token is cancelled) and the first error is returned once
//! all have ended. The demo runs every service in one process this way, so a
//! failing service stops the process instead of leaving the others half-working.

use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

pub struct Supervisor {
    shutdown: CancellationToken,
    tasks: Vec<(String, JoinHandle<anyhow::Result<()>>)>,
}

impl Supervisor {
    /// Tasks watched here stop on `shutdown`; the supervisor cancels it when one fails.
    pub fn new(shutdown: CancellationToken) -> Self {
        Supervisor { shutdown, tasks: Vec::new() }
    }

    pub fn add(&mut self, name: impl Into<String>, task: JoinHandle<anyhow::Result<()>>) {
        self.tasks.push((name.into(), task));
    }

    /// Waits for every task. The first failure cancels the others; its error (naming the
    /// task) is returned after they have all ended.
    pub async fn wait(self) -> anyhow::Result<()> {
        let shutdown = self.shutdown;
        let mut pending: futures::stream::FuturesUnordered<_> =
            self.tasks.into_iter().map(|(name, task)| async move { (name, task.await) }).collect();
        let mut first: Option<anyhow::Error> = None;
        use futures::StreamExt;
        while let Some((name, outcome)) = pending.next().await {
            let error = match outcome {
                Ok(Ok(())) => None,
                Ok(Err(e)) => Some(e.context(format!("{name} failed"))),
                Err(e) => Some(anyhow::anyhow!("{name} panicked: {e}")),
            };
            if let Some(e) = error {
                tracing::error!(error = %format!("{e:#}"), "stopping every task");
                shutdown.cancel();
                first.get_or_insert(e);
            }
        }
        first.map_or(Ok(()), Err)
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[tokio::test]
    async fn one_failure_stops_the_others() {
        let token = CancellationToken::new();
        let mut s = Supervisor::new(token.clone());
        let t = token.clone();
        s.add(
            "patient",
            tokio::spawn(async move {
                t.cancelled().await;
                Ok(())
            }),
        );
        s.add(
            "failing",
            tokio::spawn(async {
                tokio::time::sleep(Duration::from_millis(10)).await;
                anyhow::bail!("broken")
            }),
        );
        let e = tokio::time::timeout(Duration::from_secs(5), s.wait()).await.expect("the patient task was stopped").unwrap_err();
        assert_eq!(format!("{e:#}"), "failing failed: broken");
        assert!(token.is_cancelled());
    }

    #[tokio::test]
    async fn all_finishing_is_success() {
        let mut s = Supervisor::new(CancellationToken::new());
        s.add("a", tokio::spawn(async { Ok(()) }));
        s.wait().await.unwrap();
    }
}
