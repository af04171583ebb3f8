//! Where the gateway's blocking file work (spool, Maildir, journals, state files) runs.
//!
//! On a multi-thread runtime, which is what `skywave run` and the demo build, it goes to tokio's
//! blocking pool, so a slow disk never stalls the protocol tasks. On a current-thread runtime
//! (the in-process simulations in paused virtual time: the fleet benchmark, the over-the-air and
//! fleet tests) it runs as an ordinary task on the runtime's own thread instead. Paused time
//! does not move while a blocking task runs (tokio holds it), but the tasks waiting for the
//! blocking pool wake in whatever order the pool's threads finish in real time: two link
//! schedulers that took their due mail from the spool at the same virtual instant reached the
//! 5066 node in either order, so one peer's session sometimes made the first transmission alone
//! and the other waited a whole transmission for the next (a fleet test failed 1 run in 12 that
//! way), and the fleet benchmark's `mixed` rows changed from run to run. Inline, the file work
//! runs in the order the tasks asked for it, the same every run.

use tokio::runtime::{Handle, RuntimeFlavor};
use tokio::task::JoinHandle;

/// Runs `f`, blocking file work, where this runtime wants it (see the module docs). Awaiting the
/// handle gives `f`'s result, or the panic that ended it, as `spawn_blocking`'s does.
pub(crate) fn spawn<F, T>(f: F) -> JoinHandle<T>
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    match Handle::try_current().map(|h| h.runtime_flavor()) {
        Ok(RuntimeFlavor::CurrentThread) => tokio::task::spawn(async move { f() }),
        _ => tokio::task::spawn_blocking(f),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};
    use std::time::Duration;

    #[tokio::test(start_paused = true)]
    async fn on_a_current_thread_runtime_file_work_finishes_in_the_order_it_was_asked_for() {
        // The first job takes longer in real time; on the blocking pool the second would
        // finish first. Inline, they finish (and their waiters wake) in order.
        let order = Arc::new(Mutex::new(Vec::new()));
        let jobs: Vec<JoinHandle<()>> = [30u64, 0]
            .into_iter()
            .enumerate()
            .map(|(i, ms)| {
                let order = Arc::clone(&order);
                spawn(move || {
                    std::thread::sleep(Duration::from_millis(ms));
                    if let Ok(mut o) = order.lock() {
                        o.push(i);
                    }
                })
            })
            .collect();
        for j in jobs {
            assert!(j.await.is_ok());
        }
        let start = tokio::time::Instant::now();
        assert_eq!(order.lock().map(|o| o.clone()).ok(), Some(vec![0, 1]));
        assert_eq!(tokio::time::Instant::now(), start);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn on_a_multi_thread_runtime_it_goes_to_the_blocking_pool() {
        let here = std::thread::current().id();
        let there = spawn(move || std::thread::current().id()).await.ok();
        assert!(there.is_some_and(|t| t != here));
    }
}
