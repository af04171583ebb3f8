//! Prometheus metrics: the counters the gateway keeps and the endpoint that serves them.
//!
//! Counters go through the `metrics` facade (a no-op until a recorder is installed, so library
//! tests need none). The daemon installs `metrics-exporter-prometheus`'s recorder and serves its
//! rendering on `GET /metrics` from a small listener of our own, so that port 0 works and the
//! bound address can be printed. Queue depth per target and the spool's free space (against
//! the reserve new mail must leave) are measured at each scrape, so they are never stale.

use std::collections::BTreeMap;
use std::sync::Arc;

use metrics_exporter_prometheus::PrometheusHandle;
use skywave_route::SharedRoutes;
use skywave_spool::{QueueState, Spool, Target};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio::sync::watch;
use tracing::{debug, warn};

/// Counts an accepted message: its bytes, and how many of its recipients were queued for peers.
pub(crate) fn accepted(bytes: u64, relayed_recipients: u64) {
    metrics::counter!("skywave_accepted_total").increment(1);
    metrics::counter!("skywave_accepted_bytes_total").increment(bytes);
    metrics::counter!("skywave_relayed_total").increment(relayed_recipients);
}

/// Counts recipients delivered on the LAN, and the bytes delivered.
pub(crate) fn delivered(recipients: u64, bytes: u64) {
    metrics::counter!("skywave_delivered_total").increment(recipients);
    metrics::counter!("skywave_delivered_bytes_total").increment(bytes);
}

/// Counts a message refused because the spool's file system is short of space.
pub(crate) fn refused_for_space() {
    metrics::counter!("skywave_refused_for_space_total").increment(1);
}

/// Counts a bounce (DSN) sent.
pub(crate) fn bounced() {
    metrics::counter!("skywave_bounced_total").increment(1);
}

/// Counts a report of delivery only (a DSN with `Action: delivered` or `relayed`, as its
/// sender asked with `NOTIFY=SUCCESS`).
pub(crate) fn success_reported() {
    metrics::counter!("skywave_success_reports_total").increment(1);
}

/// Counts recipients moved from a peer to its fallback after waiting too long for it (or
/// after an attempt, the peer silent that long).
pub(crate) fn fell_back(recipients: u64) {
    metrics::counter!("skywave_fallback_total").increment(recipients);
}

/// Counts recipients back from a fallback, their peer answering again.
pub(crate) fn fallback_returned(recipients: u64) {
    metrics::counter!("skywave_fallback_returned_total").increment(recipients);
}

/// Counts probes of a silent peer with a fallback, by what they heard (`answered`,
/// `refusing`, `silent`).
pub(crate) fn fallback_probe(result: &'static str) {
    metrics::counter!("skywave_fallback_probes_total", "result" => result).increment(1);
}

/// Counts HMTP sessions cut short by a lost link that went on, or could not, from where the
/// peer's node had them (`XRESUME`): `side` is `ours` (a session of this gateway's: `went_on`,
/// `refused` by the peer, `given_up` for a new one) or `theirs` (the peer's: `went_on`,
/// `refused`). A session that goes on and is cut again goes on again: `ours` counts each time
/// it goes on, `theirs` each resume marker heard.
pub(crate) fn session_resumption(peer: &str, side: &'static str, result: &'static str) {
    metrics::counter!(
        "skywave_hmtp_resumptions_total",
        "peer" => peer.to_owned(),
        "side" => side,
        "result" => result
    )
    .increment(1);
}

/// Counts the octets of this gateway's sessions cut short that the peer's node already had and
/// that did not go on the air again, since the session went on from there (`XRESUME`): at
/// each time it goes on, as sending it whole would have sent them each time.
pub(crate) fn resumed_octets_spared(peer: &str, octets: u64) {
    metrics::counter!("skywave_hmtp_resumed_octets_spared_total", "peer" => peer.to_owned())
        .increment(octets);
}

/// Counts the header bytes a peer's `strip_headers` kept off the air.
pub(crate) fn header_bytes_stripped(peer: &str, bytes: u64) {
    metrics::counter!("skywave_header_bytes_stripped_total", "peer" => peer.to_owned())
        .increment(bytes);
}

/// Counts the bytes of HTML twins (and their images) a peer's or a group's `text_only` kept
/// off the air.
pub(crate) fn alternatives_left_ashore(to: &str, bytes: u64) {
    metrics::counter!("skywave_alternative_bytes_left_ashore_total", "peer" => to.to_owned())
        .increment(bytes);
}

/// Counts the images a peer's or a group's `shrink_images` made smaller on the air, and the
/// bytes that saved.
pub(crate) fn images_shrunk(to: &str, images: u64, bytes: u64) {
    metrics::counter!("skywave_images_shrunk_total", "peer" => to.to_owned()).increment(images);
    metrics::counter!("skywave_image_bytes_saved_total", "peer" => to.to_owned()).increment(bytes);
}

/// A sender was told its message is delayed (a DSN with `Action: delayed`).
pub(crate) fn delay_warned() {
    metrics::counter!("skywave_delay_warnings_total").increment(1);
}

/// Recipients waiting (not final) per target in the live queue, and the messages held for
/// the operator (by `skywave queue hold` or a peer's `hold_above`), from the spool.
pub fn queue_depth(spool: &Spool) -> skywave_spool::Result<(BTreeMap<String, u64>, u64)> {
    let mut depth = BTreeMap::new();
    let mut held = 0;
    for entry in spool.entries()? {
        let entry = entry?;
        match entry.state {
            QueueState::Held => held += 1,
            QueueState::Queued => {
                let Some(env) = entry.envelope else { continue };
                for r in env.recipients.iter().filter(|r| !r.state.is_final()) {
                    *depth.entry(r.target.to_string()).or_insert(0) += 1;
                }
            }
            QueueState::Dead => {}
        }
    }
    Ok((depth, held))
}

/// Serves `GET /metrics` (any path, in fact) until `shutdown`.
pub async fn serve(
    listener: TcpListener,
    handle: PrometheusHandle,
    spool: Arc<Spool>,
    routes: Arc<SharedRoutes>,
    clock: crate::clock::Clock,
    mut shutdown: watch::Receiver<bool>,
) {
    loop {
        let (mut stream, peer) = tokio::select! {
            a = listener.accept() => match a {
                Ok(a) => a,
                Err(e) => {
                    warn!(error = %e, "metrics accept failed");
                    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                    continue;
                }
            },
            _ = shutdown.changed() => return,
        };
        let handle = handle.clone();
        let spool = Arc::clone(&spool);
        // Every known target is reported, so a queue that emptied shows 0.
        let table = routes.current();
        let mut targets = vec![Target::Lan.to_string()];
        targets.extend(
            table
                .peers()
                .iter()
                .map(|p| Target::Peer(p.name.clone()).to_string()),
        );
        // Whether each scheduled peer's window is open now (1) or not (0).
        let now = clock.unix_now();
        for p in table.peers() {
            if let Some(s) = &p.schedule {
                metrics::gauge!("skywave_schedule_open", "peer" => p.name.clone())
                    .set(if s.is_open(now) { 1.0 } else { 0.0 });
            }
        }
        drop(table);
        tokio::spawn(async move {
            // Read the request head (bounded); we answer every request the same way.
            let mut buf = vec![0u8; 4096];
            let mut got = 0;
            let read = tokio::time::timeout(std::time::Duration::from_secs(5), async {
                while got < buf.len() {
                    let n = stream.read(&mut buf[got..]).await?;
                    if n == 0 {
                        break;
                    }
                    got += n;
                    if buf[..got].windows(4).any(|w| w == b"\r\n\r\n") {
                        break;
                    }
                }
                std::io::Result::Ok(())
            })
            .await;
            if !matches!(read, Ok(Ok(()))) {
                return;
            }
            let measured = Arc::clone(&spool);
            match crate::blocking::spawn(move || measured.room()).await {
                Ok(Ok(room)) => {
                    metrics::gauge!("skywave_spool_free_bytes").set(room.space.bytes as f64);
                    metrics::gauge!("skywave_spool_reserve_bytes").set(room.reserve as f64);
                }
                other => warn!(?other, "the spool's free space not measured"),
            }
            let depth = crate::blocking::spawn(move || queue_depth(&spool)).await;
            match depth {
                Ok(Ok((mut depth, held))) => {
                    for t in targets {
                        depth.entry(t).or_insert(0);
                    }
                    for (target, n) in depth {
                        metrics::gauge!("skywave_queue_depth", "target" => target).set(n as f64);
                    }
                    metrics::gauge!("skywave_held_messages").set(held as f64);
                }
                other => warn!(?other, "queue depth not measured"),
            }
            let body = handle.render();
            let head = format!(
                "HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                body.len()
            );
            let _ = stream.write_all(head.as_bytes()).await;
            let _ = stream.write_all(body.as_bytes()).await;
            let _ = stream.shutdown().await;
            debug!(%peer, "metrics scraped");
        });
    }
}
