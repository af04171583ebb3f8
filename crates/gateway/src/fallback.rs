//! Peer fallback: mail that has waited too long for a peer goes to the peer behind it.
//!
//! Sits beside the link schedulers, between the spool and the routing table. A peer with
//! `fallback = "other"` and `fallback_after = "30m"` in `routes.toml` (a satellite or
//! line-of-sight IP link, with the HF path behind it, say) keeps its mail for that long after
//! the message arrived here; what still waits for it then, and is free to go, moves to the
//! other peer ([`Spool::fall_back`]): not in flight, not held by an operator, and within the
//! other peer's size limit and its `hold_above` (so that a fallback to HF never sends what the
//! HF peer would keep for the operator's approval). The other peer's own fallback, if any,
//! counts from the same arrival.
//!
//! The rule reads the clock and the queue only, never a link's state: it works the same for
//! every bearer, a link that is up but too slow included, and it says what happens in words
//! an administrator can check (`skywave routes explain`). Every [`POLL`] and at start-up, with
//! the routing table of the moment (a reload takes effect at the next look).

use std::sync::Arc;
use std::time::Duration;

use skywave_route::{Peer, SharedRoutes};
use skywave_spool::{QueueId, Spool, Target};
use tokio::sync::{Notify, watch};
use tracing::{info, warn};

use crate::clock::Clock;

/// How often the queue is looked at for mail to move.
pub const POLL: Duration = Duration::from_secs(30);

/// Moves what has waited too long, now; returns how many recipients moved (the HF links are
/// woken when any did).
pub async fn look(spool: &Arc<Spool>, routes: &SharedRoutes, clock: Clock, wake: &Notify) -> u64 {
    let table = routes.current();
    let now = clock.unix_now();
    let mut count = 0;
    for peer in table.peers() {
        let Some(fb) = &peer.fallback else { continue };
        let Some(to) = table.peer(&fb.peer) else {
            continue;
        };
        let arrived_by = now.saturating_sub(fb.after);
        let (s, from, into) = (Arc::clone(spool), peer.clone(), to.clone());
        let moved =
            crate::blocking::spawn(move || move_waiting(&s, &from, &into, arrived_by)).await;
        match moved {
            Ok(Ok(moved)) => {
                for (id, rcpts) in moved {
                    info!(queue_id = %id, from = %peer.name, to = %to.name, recipients = ?rcpts,
                        waited_s = fb.after, "waited too long for its peer: goes to the fallback");
                    count += rcpts.len() as u64;
                }
            }
            Ok(Err(e)) => {
                warn!(from = %peer.name, to = %to.name, error = %e, "cannot move mail to the fallback peer")
            }
            Err(e) => warn!(error = %e, "the fallback look failed"),
        }
    }
    if count > 0 {
        crate::metrics::fell_back(count);
        wake.notify_waiters();
    }
    count
}

/// The largest message `to` takes without holding it for its operator: its `size_limit`, or
/// its `hold_above` when that is lower.
pub fn size_allowed(to: &Peer) -> u64 {
    to.size_limit.min(to.hold_above.unwrap_or(u64::MAX))
}

/// Moves to `to` what still waits for `from` of the messages that arrived by `arrived_by` and
/// are within [`size_allowed`] for `to` ([`Spool::fall_back`]): the fallback's rule, and the
/// operator's `skywave queue move` (which takes everything, whatever its age).
pub fn move_waiting(
    spool: &Spool,
    from: &Peer,
    to: &Peer,
    arrived_by: u64,
) -> skywave_spool::Result<Vec<(QueueId, Vec<String>)>> {
    spool.fall_back(
        &Target::Peer(from.name.clone()),
        &Target::Peer(to.name.clone()),
        arrived_by,
        size_allowed(to),
    )
}

/// Looks at start-up and every [`POLL`] until `shutdown` turns true.
pub async fn run(
    spool: Arc<Spool>,
    routes: Arc<SharedRoutes>,
    clock: Clock,
    wake: Arc<Notify>,
    mut shutdown: watch::Receiver<bool>,
) {
    loop {
        look(&spool, &routes, clock, &wake).await;
        tokio::select! {
            () = tokio::time::sleep(POLL) => {}
            _ = shutdown.changed() => return,
        }
    }
}
