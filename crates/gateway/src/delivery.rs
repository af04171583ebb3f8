//! LAN delivery: hands mail queued for [`Target::Lan`] to the ship's own mail system.
//!
//! Sits after the spool on the receiving side of the data path (mail that arrived over HF, and
//! mail between LAN domains). Two ways, chosen in `[delivery]`:
//! - a Maildir (maildir(5)): the message, with a `Return-Path:` header, is written to `tmp/`
//!   under a unique name, synced, linked into `new/` (and unlinked from `tmp/`), and `new/` is
//!   synced, so a delivered
//!   message survives a power cut;
//! - SMTP to the LAN smarthost with lettre (`send_raw` with the queued envelope), where a 4xx or
//!   a connection failure defers the recipients (retried with the spool's backoff) and a 5xx
//!   fails them (the spool builds a DSN and [`Spool::bounce`] queues it to the sender). lettre
//!   reports one result per transaction, so a permanent refusal of a message with several
//!   recipients is followed by one transaction per recipient: one bad address never bounces
//!   the others.
//!
//! The loop runs whatever [`Spool::due`] returns for the LAN, sleeps until the spool's next due
//! time (at most a minute, so expiry is checked too), and wakes at once when the listener has
//! queued mail for the LAN. Mail for HF peers stays queued for the link scheduler.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use skywave_spool::{DueMessage, QueueId, Spool, Target};
use tokio::sync::{Notify, watch};
use tracing::{Instrument, info, info_span, warn};

use crate::config::{Delivery, SmarthostTls};
use crate::outcome::{Outcome, Recorder};

/// Most bytes of LAN mail taken from the spool in one round.
const ROUND_BYTES: u64 = 4 << 20;
/// Longest sleep between rounds (expiry is checked at least this often).
const MAX_SLEEP: Duration = Duration::from_secs(60);

/// What the delivery loop needs.
#[derive(Debug)]
pub struct DeliveryContext {
    /// Our host name (Maildir file names, SMTP HELO).
    pub hostname: String,
    /// Where LAN mail goes.
    pub delivery: Delivery,
    /// The spool.
    pub spool: Arc<Spool>,
    /// Records outcomes and queues bounces.
    pub recorder: Arc<Recorder>,
    /// Woken when LAN mail has been queued.
    pub wake: Arc<Notify>,
}

/// Runs until `shutdown` turns true (after finishing the message in hand).
pub async fn run(ctx: Arc<DeliveryContext>, mut shutdown: watch::Receiver<bool>) {
    if let Delivery::Maildir(dir) = &ctx.delivery
        && let Err(e) = create_maildir(dir)
    {
        warn!(maildir = %dir.display(), error = %e, "cannot create the Maildir; deliveries will be deferred");
    }
    ctx.recorder.send_pending_bounces().await;
    loop {
        if *shutdown.borrow() {
            return;
        }
        let now = ctx.recorder.clock.unix_now();
        let spool = Arc::clone(&ctx.spool);
        let due =
            tokio::task::spawn_blocking(move || spool.due(&Target::Lan, now, ROUND_BYTES)).await;
        let due = match due {
            Ok(Ok(due)) => due,
            other => {
                warn!(?other, "cannot read the spool for LAN delivery");
                Vec::new()
            }
        };
        let worked = !due.is_empty();
        for msg in due {
            let span = info_span!("deliver", queue_id = %msg.id);
            deliver(&ctx, msg).instrument(span).await;
            if *shutdown.borrow() {
                return;
            }
        }
        if worked {
            continue;
        }
        ctx.recorder.expire().await;
        let spool = Arc::clone(&ctx.spool);
        let next = tokio::task::spawn_blocking(move || spool.next_due(&Target::Lan))
            .await
            .ok()
            .and_then(Result::ok)
            .flatten();
        let now = ctx.recorder.clock.unix_now();
        let sleep = next.map_or(MAX_SLEEP, |t| {
            Duration::from_secs(t.saturating_sub(now).max(1)).min(MAX_SLEEP)
        });
        tokio::select! {
            () = ctx.wake.notified() => {}
            () = tokio::time::sleep(sleep) => {}
            _ = shutdown.changed() => {}
        }
    }
}

async fn deliver(ctx: &DeliveryContext, msg: DueMessage) {
    let spool = Arc::clone(&ctx.spool);
    let id = msg.id.clone();
    let rcpts = msg.recipients.clone();
    let now = ctx.recorder.clock.unix_now();
    let loaded = tokio::task::spawn_blocking(move || {
        spool.mark_in_flight(&id, &rcpts, now)?;
        spool.load(&id)
    })
    .await;
    let file = match loaded {
        Ok(Ok((_, file))) => file,
        other => {
            warn!(?other, "cannot load the message");
            return;
        }
    };
    let groups = match &ctx.delivery {
        Delivery::Maildir(dir) => {
            let key = maildir_key(&msg.id, &msg.recipients);
            let hostname = ctx.hostname.clone();
            let dir = dir.clone();
            let sender = msg.sender.clone();
            let body = file.message;
            let written = tokio::task::spawn_blocking(move || {
                // A crash between the Maildir write and the spool update requeues the message;
                // the file already written under this key is its delivery, not a reason to write
                // a second copy.
                if let Some(name) = maildir_find(&dir, &key)? {
                    return Ok((name, true));
                }
                let name = maildir_name(&hostname, &key);
                write_maildir(&dir, &name, &sender, &body).map(|()| (name, false))
            })
            .await;
            let outcome = match written {
                Ok(Ok((name, again))) => {
                    if again {
                        info!(file = %name, "already in the Maildir (written before a restart)");
                    } else {
                        info!(file = %name, "delivered to the Maildir");
                    }
                    Outcome::Delivered
                }
                Ok(Err(e)) => Outcome::Deferred(format!("Maildir write failed: {e}")),
                Err(e) => Outcome::Deferred(format!("Maildir task failed: {e}")),
            };
            vec![(msg.recipients.clone(), outcome)]
        }
        Delivery::Smarthost {
            host,
            port,
            timeout,
            tls,
        } => {
            let send = |rcpts: Vec<String>| {
                let body = &file.message;
                let sender = &msg.sender;
                async move {
                    let hop = Hop {
                        host,
                        port: *port,
                        timeout: *timeout,
                        tls,
                    };
                    let o = smarthost(ctx, &hop, sender, &rcpts, body).await;
                    (rcpts, o)
                }
            };
            let (all, outcome) = send(msg.recipients.clone()).await;
            if matches!(outcome, Outcome::Failed { .. }) && all.len() > 1 {
                // lettre gives one result per transaction: when it was refused for good, find
                // out which recipients are refused by sending to each alone, so that one bad
                // address never bounces the others. Bounded by the recipient count.
                let mut groups = Vec::with_capacity(all.len());
                for r in all {
                    groups.push(send(vec![r]).await);
                }
                groups
            } else {
                vec![(all, outcome)]
            }
        }
    };
    for (rcpts, outcome) in groups {
        ctx.recorder
            .record(&msg.id, &msg.sender, msg.size, rcpts, outcome)
            .await;
    }
}

/// The smarthost, as one delivery attempt sees it.
struct Hop<'a> {
    host: &'a str,
    port: u16,
    timeout: Duration,
    tls: &'a SmarthostTls,
}

async fn smarthost(
    ctx: &DeliveryContext,
    hop: &Hop<'_>,
    sender: &str,
    rcpts: &[String],
    body: &[u8],
) -> Outcome {
    use lettre::transport::smtp::extension::ClientId;
    use lettre::{AsyncSmtpTransport, AsyncTransport, Tokio1Executor};
    let from = if sender.is_empty() {
        None
    } else {
        match sender.parse::<lettre::Address>() {
            Ok(a) => Some(a),
            Err(e) => {
                return Outcome::Failed {
                    status: "5.1.7".into(),
                    diagnostic: format!("sender <{sender}> cannot be sent over SMTP: {e}"),
                };
            }
        }
    };
    let mut to = Vec::new();
    for r in rcpts {
        match r.parse::<lettre::Address>() {
            Ok(a) => to.push(a),
            Err(e) => {
                return Outcome::Failed {
                    status: "5.1.3".into(),
                    diagnostic: format!("recipient <{r}> cannot be sent over SMTP: {e}"),
                };
            }
        }
    }
    let envelope = match lettre::address::Envelope::new(from, to) {
        Ok(e) => e,
        Err(e) => {
            return Outcome::Failed {
                status: "5.1.3".into(),
                diagnostic: format!("bad envelope: {e}"),
            };
        }
    };
    let Hop {
        host,
        port,
        timeout,
        tls,
    } = *hop;
    let tls = match tls_parameters(host, tls) {
        Ok(t) => t,
        Err(e) => return Outcome::Deferred(format!("smarthost {host}:{port}: TLS set-up: {e}")),
    };
    let transport = AsyncSmtpTransport::<Tokio1Executor>::builder_dangerous(host)
        .port(port)
        .tls(tls)
        .timeout(Some(timeout))
        .hello_name(ClientId::Domain(ctx.hostname.clone()))
        .build();
    match tokio::time::timeout(timeout, transport.send_raw(&envelope, body)).await {
        Ok(Ok(response)) => {
            info!(smarthost = %host, reply = ?response.code(), "delivered to the smarthost");
            Outcome::Delivered
        }
        Ok(Err(e)) if e.is_permanent() => Outcome::Failed {
            status: "5.0.0".to_owned(),
            diagnostic: format!("smarthost {host}:{port} refused the message: {e}"),
        },
        Ok(Err(e)) => Outcome::Deferred(format!("smarthost {host}:{port}: {e}")),
        Err(_) => Outcome::Deferred(format!(
            "smarthost {host}:{port}: no answer within {} s",
            timeout.as_secs()
        )),
    }
}

/// lettre's TLS setting for the smarthost: the public web roots plus the configured ones, the
/// certificate checked against the host name we connect to.
fn tls_parameters(
    host: &str,
    tls: &SmarthostTls,
) -> Result<lettre::transport::smtp::client::Tls, lettre::transport::smtp::Error> {
    use lettre::transport::smtp::client::{Certificate, Tls, TlsParameters};
    let params = |ca: &Option<Vec<u8>>| {
        let mut b = TlsParameters::builder(host.to_owned());
        if let Some(pem) = ca {
            b = b.add_root_certificate(Certificate::from_pem(pem)?);
        }
        b.build()
    };
    Ok(match tls {
        SmarthostTls::None => Tls::None,
        SmarthostTls::Opportunistic { ca } => Tls::Opportunistic(params(ca)?),
        SmarthostTls::Required { ca } => Tls::Required(params(ca)?),
    })
}

fn create_maildir(dir: &Path) -> std::io::Result<()> {
    for sub in ["tmp", "new", "cur"] {
        std::fs::create_dir_all(dir.join(sub))?;
    }
    Ok(())
}

/// What names one delivery in the Maildir: the queue id and a stable hash of the recipients the
/// file is for. It is the unique part of the file name, so that a delivery repeated after a crash
/// finds the file it wrote the first time ([`maildir_find`]).
fn maildir_key(id: &QueueId, rcpts: &[String]) -> String {
    // FNV-1a: stable across builds, unlike std's hasher, since the key outlives the process.
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in rcpts.iter().flat_map(|r| r.bytes().chain([b'\n'])) {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
    }
    format!("I{id}R{hash:016x}")
}

/// A unique file name as maildir(5) describes: time, a unique part (the delivery's key) and our
/// host name (with '/' and ':' replaced, which may not appear in it).
fn maildir_name(hostname: &str, key: &str) -> String {
    let now = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap_or_default();
    let host: String = hostname
        .chars()
        .map(|c| match c {
            '/' => "\\057".to_owned(),
            ':' => "\\072".to_owned(),
            c => c.to_string(),
        })
        .collect();
    format!("{}.{key}.{host}", now.as_secs())
}

/// The name of a file already delivered under `key`, in `new/` or (once a mail reader moved it)
/// `cur/`.
fn maildir_find(dir: &Path, key: &str) -> std::io::Result<Option<String>> {
    let needle = format!(".{key}.");
    for sub in ["new", "cur"] {
        let entries = match std::fs::read_dir(dir.join(sub)) {
            Ok(entries) => entries,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err(e),
        };
        for entry in entries {
            let name = entry?.file_name().to_string_lossy().into_owned();
            if name.contains(&needle) {
                return Ok(Some(name));
            }
        }
    }
    Ok(None)
}

/// Writes one message into the Maildir durably: tmp/, fsync, rename into new/, fsync new/.
pub fn write_maildir(dir: &Path, name: &str, sender: &str, body: &[u8]) -> std::io::Result<()> {
    create_maildir(dir)?;
    let tmp: PathBuf = dir.join("tmp").join(name);
    let new: PathBuf = dir.join("new").join(name);
    let result = (|| {
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&tmp)?;
        // Return-Path records the envelope sender at final delivery (RFC 5321 4.4).
        let sender: String = sender.chars().filter(|c| !c.is_control()).collect();
        f.write_all(format!("Return-Path: <{sender}>\r\n").as_bytes())?;
        f.write_all(body)?;
        f.sync_all()?;
        drop(f);
        // link(2), not rename(2): it refuses to replace an existing file (maildir(5)).
        std::fs::hard_link(&tmp, &new)?;
        std::fs::File::open(dir.join("new"))?.sync_all()
    })();
    let _ = std::fs::remove_file(&tmp);
    result
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn maildir_write_lands_in_new_with_return_path() {
        let dir = tempfile::tempdir().unwrap();
        let md = dir.path().join("Maildir");
        let id = QueueId::parse("0123456789abcdef01234567").unwrap();
        let key = maildir_key(&id, &["a@ship".to_string()]);
        let other = maildir_key(&id, &["b@ship".to_string()]);
        assert_ne!(key, other);
        let a = maildir_name("gw:x/y", &key);
        assert_eq!(maildir_find(&md, &key).unwrap(), None);
        assert!(a.ends_with(".gw\\072x\\057y"), "{a}");
        write_maildir(&md, &a, "a@ship", b"Subject: x\r\n\r\nhi\r\n").unwrap();
        assert_eq!(std::fs::read_dir(md.join("tmp")).unwrap().count(), 0);
        let text = std::fs::read(md.join("new").join(&a)).unwrap();
        assert_eq!(text, b"Return-Path: <a@ship>\r\nSubject: x\r\n\r\nhi\r\n");
        assert!(md.join("cur").is_dir());
        // The same name twice is refused rather than overwritten.
        assert!(write_maildir(&md, &a, "", b"x").is_err());
        assert!(md.join("new").join(&a).exists());
        // A repeated delivery (after a crash before the spool was updated) finds the first file,
        // also once a mail reader moved it to cur/.
        assert_eq!(maildir_find(&md, &key).unwrap(), Some(a.clone()));
        assert_eq!(maildir_find(&md, &other).unwrap(), None);
        std::fs::rename(
            md.join("new").join(&a),
            md.join("cur").join(format!("{a}:2,S")),
        )
        .unwrap();
        assert_eq!(maildir_find(&md, &key).unwrap(), Some(format!("{a}:2,S")));
    }
}
