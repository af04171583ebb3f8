//! Peer fallback: mail that has waited too long for a peer goes to the peer behind it, and
//! comes back when a peer that did not answer answers again.
//!
//! Sits beside the link schedulers, between the spool and the routing table. A peer with
//! `fallback = "other"` and `fallback_after = "30m"` in `routes.toml` (a satellite or
//! line-of-sight IP link, with the HF path behind it, say) keeps its mail for that long after
//! the message arrived here; what still waits for it then, and is free to go, moves to the
//! other peer ([`Spool::fall_back`]): not in flight, not held by an operator, and within the
//! other peer's size limit and its `hold_above` (so that a fallback to HF never sends what the
//! HF peer would keep for the operator's approval), weighed as the other peer's links send it
//! (after its `strip_headers`, `text_only` and `shrink_images`, as its own mail is weighed at
//! intake). The other peer's own fallback, if any,
//! counts from the same arrival. That rule reads the clock and the queue only: it works the
//! same for every bearer, a link that is up but too slow included.
//!
//! Two more come from what our own sessions heard from the peer ([`crate::heard`]):
//! - A peer that has answered none of them for as long as its `fallback_after` is down: mail
//!   it has been tried for moves at once, whatever its age. New mail still gets one attempt
//!   there first, which may find the peer back; in a long outage of the satellite a message
//!   then waits one attempt, not half an hour.
//! - Mail that fell back while its peer was not answering goes back to that peer when the
//!   peer answers one of our sessions again (new mail for it, tried first, or for a peer over
//!   TCP/IP a probe, `hf::tcp_link`, while such mail waits), if the fallback has not taken it
//!   yet ([`Spool::fall_back_return`]): an HF peer with radio schedules may
//!   not take it for hours. Only an answer after the move counts (a restart remembers the
//!   last answer, which may be older), and nothing goes into a peer an operator holds. Its
//!   wait for the fallback then counts from its return. Mail that fell back while its peer
//!   answered (slow, or refusing it for now) stays.
//!
//! Each says what happens in words an administrator can check (`skywave routes explain`).
//! Every [`POLL`], at start-up, and whenever a session is answered or goes unanswered, with
//! the routing table of the moment (a reload takes effect at the next look).

use std::sync::Arc;
use std::time::Duration;

use skywave_route::{Peer, SharedRoutes};
use skywave_spool::{FallBack, QueueId, Spool, Target};
use tokio::sync::{Notify, watch};
use tracing::{info, warn};

use crate::clock::Clock;
use crate::heard::Heard;
use crate::hf::Ashore;

/// How often the queue is looked at for mail to move.
pub const POLL: Duration = Duration::from_secs(30);

/// Moves what has waited too long, or was tried for a peer that has not answered for that
/// long, and brings back what fell back from a peer that answers again, now; returns how many
/// recipients moved (the HF links are woken when any did).
pub async fn look(
    spool: &Arc<Spool>,
    routes: &SharedRoutes,
    heard: &Heard,
    clock: Clock,
    wake: &Notify,
) -> u64 {
    let table = routes.current();
    let now = clock.unix_now();
    let (mut count, mut returned) = (0, 0);
    for peer in table.peers() {
        let Some(fb) = &peer.fallback else { continue };
        let Some(to) = table.peer(&fb.peer) else {
            continue;
        };
        let heard = heard.get(&peer.name);
        let down = heard.silent_for(fb.after, now);
        let rule = FallBack {
            waited_since: now.saturating_sub(fb.after),
            tried: down,
            back: heard.silent_since.is_some(),
            max_size: size_allowed(to),
            now,
        };
        let (s, from, into) = (Arc::clone(spool), peer.clone(), to.clone());
        // When the peer last answered, if it has not been silent since.
        let answered = heard.answered.filter(|_| heard.silent_since.is_none());
        let moved = crate::blocking::spawn(move || {
            let mut moved = Vec::new();
            // Back first: what the peer answers for again must not be sent away again.
            if let Some(answered) = answered {
                let back = s.fall_back_return(
                    &Target::Peer(into.name.clone()),
                    &from.name,
                    answered,
                    size_allowed(&from),
                    now,
                )?;
                moved.extend(back.into_iter().map(|m| (true, m)));
            }
            let away = move_by(&s, &from, &into, &rule)?;
            moved.extend(away.into_iter().map(|m| (false, m)));
            Ok::<_, skywave_spool::Error>(moved)
        })
        .await;
        match moved {
            Ok(Ok(moved)) => {
                for (back, (id, rcpts)) in moved {
                    let n = rcpts.len() as u64;
                    if back {
                        returned += n;
                        info!(queue_id = %id, from = %to.name, to = %peer.name, recipients = ?rcpts,
                            "its peer answers again: back from the fallback");
                    } else if down {
                        info!(queue_id = %id, from = %peer.name, to = %to.name, recipients = ?rcpts,
                            silent_s = heard.silent_since.map(|t| now.saturating_sub(t)),
                            "its peer has not answered for its fallback_after: goes to the fallback");
                    } else {
                        info!(queue_id = %id, from = %peer.name, to = %to.name, recipients = ?rcpts,
                            waited_s = fb.after, "waited too long for its peer: goes to the fallback");
                    }
                    count += n;
                }
            }
            Ok(Err(e)) => {
                warn!(from = %peer.name, to = %to.name, error = %e, "cannot move mail between a peer and its fallback")
            }
            Err(e) => warn!(error = %e, "the fallback look failed"),
        }
    }
    if count > 0 {
        crate::metrics::fell_back(count - returned);
        crate::metrics::fallback_returned(returned);
        wake.notify_waiters();
    }
    count
}

/// The largest message `to` takes without holding it for its operator: its `size_limit`, or
/// its `hold_above` when that is lower.
pub fn size_allowed(to: &Peer) -> u64 {
    to.size_limit.min(to.hold_above.unwrap_or(u64::MAX))
}

/// Moves to `to` what still waits for `from` by `rule` ([`Spool::fall_back`]), each message
/// weighed as `to`'s links send it (a photograph `shrink_images` scales down fits as it goes).
fn move_by(
    spool: &Spool,
    from: &Peer,
    to: &Peer,
    rule: &FallBack,
) -> skywave_spool::Result<Vec<(QueueId, Vec<String>)>> {
    let (from, ashore) = (Target::Peer(from.name.clone()), Ashore::of_peer(to));
    let to = Target::Peer(to.name.clone());
    if ashore.leaves_any() {
        spool.fall_back_weighed(&from, &to, rule, &|m| ashore.weigh(m))
    } else {
        spool.fall_back(&from, &to, rule)
    }
}

/// The operator's `skywave queue move`: everything still waiting for `from`, whatever its age,
/// within [`size_allowed`] for `to`; it does not come back by itself.
pub fn move_waiting(
    spool: &Spool,
    from: &Peer,
    to: &Peer,
    now: u64,
) -> skywave_spool::Result<Vec<(QueueId, Vec<String>)>> {
    let rule = FallBack {
        waited_since: u64::MAX,
        tried: false,
        back: false,
        max_size: size_allowed(to),
        now,
    };
    move_by(spool, from, to, &rule)
}

/// Looks at start-up, every [`POLL`] and whenever a session is answered or goes unanswered,
/// until `shutdown` turns true.
pub async fn run(
    spool: Arc<Spool>,
    routes: Arc<SharedRoutes>,
    heard: Arc<Heard>,
    clock: Clock,
    wake: Arc<Notify>,
    mut shutdown: watch::Receiver<bool>,
) {
    loop {
        let changed = heard.changed.notified();
        tokio::pin!(changed);
        changed.as_mut().enable();
        look(&spool, &routes, &heard, clock, &wake).await;
        tokio::select! {
            () = tokio::time::sleep(POLL) => {}
            () = changed => {}
            _ = shutdown.changed() => return,
        }
    }
}
