//! The link scheduler of one CFTP peer (SAP 12): mail files out, mail files in.
//!
//! CFTP has no sessions: each message is one gzipped mail file, sent as RCOPv1/BFTPv1 U_PDUs
//! and acknowledged by the receiver once it holds the file (Annex F). Towards a skywave peer
//! the messages of a batch share files (bundles of up to `cftp_bundle`, compressed as one,
//! see [`skywave_hmtp::cftp::encode_bundle`]); the receiving side takes bundles from anyone.
//! The task keeps one
//! [`CftpSender`] fed from the spool (priority order, `batch_bytes` at a time, one file in
//! flight towards a standard peer, `cftp_files_in_flight` towards a skywave peer) and one
//! [`CftpReceiverSession`] for files from the peer, whose acknowledgement leaves only after the
//! spool write (and the de-duplication record) is durable.
//!
//! CFTP has no negative acknowledgement, so this gateway answers for a file as an MTA that has
//! accepted it: recipients it refuses for good (no route, relaying denied, a loop) get a DSN
//! back to the sender from here and the file is acknowledged; a temporary refusal or a spool
//! error leaves the file unacknowledged, and the peer sends it again.
//!
//! A transfer record covers a round: from the moment files start going out until the sender is
//! idle again (and one record per file received).

use std::collections::HashMap;
use std::sync::Arc;

use skywave_hmtp::{
    AckOutcome, CftpReceiverEvent, CftpReceiverSession, CftpReceiverSettings, CftpSender,
    CftpSenderSettings, CftpSenderStats, Disposition, MessageResult,
};
use skywave_sis::NodeAddress;
use skywave_smtp::{BodyType, Envelope, Protocol};
use skywave_spool::{DueMessage, Handoff, Target};
use tokio::sync::{mpsc, watch};
use tokio::time::Instant;
use tracing::{Instrument, debug, info, info_span, warn};

use super::dedup_store::DedupStore;
use super::sis::{Endpoint, LinkInput, Report, priority_5066};
use super::transfer::{Direction, TransferRecord};
use super::{Classified, HfContext, Look, Take, classify, sleep_opt};
use crate::intake::{GatewayPolicy, Source};
use crate::outcome::Outcome;

/// A round of sending, for its transfer record.
struct Round {
    start_unix: f64,
    before: CftpSenderStats,
    messages: u64,
    accepted: u64,
}

/// The task of one CFTP peer.
pub(super) struct CftpLink {
    pub(super) name: String,
    pub(super) node: NodeAddress,
    pub(super) endpoint: Endpoint,
    pub(super) inbox: mpsc::UnboundedReceiver<LinkInput>,
    pub(super) report: mpsc::UnboundedSender<LinkInput>,
    pub(super) ctx: Arc<HfContext>,
    pub(super) dedup: DedupStore,
    pub(super) shutdown: watch::Receiver<bool>,
}

struct State {
    sender: Option<CftpSender>,
    receiver: CftpReceiverSession,
    /// Messages handed to the sender, by queue id.
    pushed: HashMap<String, DueMessage>,
    round: Option<Round>,
    /// New mail arrived: wait until then for more before taking it, so that a burst goes out
    /// together (in one bundle towards a skywave peer), as an HMTP link gathers a batch.
    gather_until: Option<Instant>,
}

impl CftpLink {
    pub(super) async fn run(self) {
        let span = info_span!("cftp", peer = %self.name);
        self.run_inner().instrument(span).await;
    }

    async fn run_inner(mut self) {
        let target = Target::Peer(self.name.clone());
        let mut st = State {
            sender: None,
            receiver: CftpReceiverSession::new(CftpReceiverSettings::default()),
            pushed: HashMap::new(),
            round: None,
            gather_until: None,
        };
        loop {
            if *self.shutdown.borrow() {
                break;
            }
            let mut closed = false;
            loop {
                match self.inbox.try_recv() {
                    Ok(input) => self.on_input(input, &target, &mut st).await,
                    Err(mpsc::error::TryRecvError::Empty) => break,
                    Err(mpsc::error::TryRecvError::Disconnected) => {
                        closed = true;
                        break;
                    }
                }
            }
            if closed {
                break;
            }
            if st.gather_until.is_some_and(|g| Instant::now() >= g) {
                st.gather_until = None;
            }
            let look = if st.gather_until.is_none() {
                self.refill(&target, &mut st).await
            } else {
                Look::Periodic
            };
            self.pump(&mut st).await;

            let wake = Arc::clone(&self.ctx.wake);
            let notified = wake.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            let next_look = match st.gather_until {
                Some(g) => g,
                None => self.ctx.next_look(look, &target).await,
            };
            let sender_deadline = st
                .sender
                .as_ref()
                .and_then(CftpSender::poll_timeout)
                .map(Instant::from_std);
            let receiver_deadline = st.receiver.poll_timeout().map(Instant::from_std);
            tokio::select! {
                input = self.inbox.recv() => {
                    let Some(input) = input else { break };
                    self.on_input(input, &target, &mut st).await;
                }
                () = &mut notified => {
                    if st.gather_until.is_none() {
                        st.gather_until = Some(Instant::now() + self.ctx.config.batch_delay);
                    }
                }
                () = tokio::time::sleep_until(next_look) => {}
                () = sleep_opt(sender_deadline) => {
                    if let Some(s) = st.sender.as_mut() {
                        s.handle_timeout(Instant::now().into_std());
                    }
                }
                () = sleep_opt(receiver_deadline) => {
                    st.receiver.handle_timeout(Instant::now().into_std());
                }
                _ = self.shutdown.changed() => {}
            }
        }
        // Shutting down: files without an acknowledgement stay queued.
        if let Some(s) = st.sender.as_mut() {
            s.close(Instant::now().into_std());
        }
        self.pump(&mut st).await;
    }

    async fn on_input(&mut self, input: LinkInput, target: &Target, st: &mut State) {
        let now = Instant::now().into_std();
        match input {
            // In EMCON nothing may answer; the peer keeps its files and sends them again.
            LinkInput::Updu(_) if self.ctx.in_emcon() => {
                warn!("CFTP from the peer while this gateway keeps EMCON: not acknowledged");
            }
            LinkInput::Updu(b) => {
                let ack = match st.sender.as_mut() {
                    Some(s) => s.receive(now, &b),
                    None => AckOutcome::NotAnAck,
                };
                match ack {
                    AckOutcome::NotAnAck => {
                        st.receiver.receive(now, &b, &mut self.dedup.cache);
                    }
                    AckOutcome::Acked { ids } => debug!(queue_ids = ?ids, "file acknowledged"),
                    other => debug!(?other, "acknowledgement ignored"),
                }
            }
            LinkInput::LinkUp => {
                self.ctx
                    .intake
                    .spool
                    .link_up(target, self.ctx.clock.unix_now());
            }
            LinkInput::LinkDown(reason) => debug!(%reason, "link down"),
            LinkInput::Delivered {
                submission,
                confirmed: true,
            } => {
                // A file's last segment confirmed: the peer has the file, its acknowledgement
                // can come, and the ack timeout runs from here.
                let (id, segment) = untag(submission);
                if let Some(s) = st.sender.as_mut()
                    && s.delivered(now, id, segment)
                {
                    debug!(updu_id = id, "the peer's node has the file");
                }
            }
            LinkInput::Delivered { .. } => {}
            LinkInput::SendFailed { reason, .. } => {
                // The sender's ack timer resends what did not arrive.
                debug!(%reason, "a U_PDU was not delivered; the file will be sent again");
            }
        }
    }

    /// Where the endpoint reports a file's U_PDU delivered or not, tagged with its RCOP U_PDU id
    /// and segment number ([`tag`]): a confirmation of a file's last segment starts its ack
    /// timeout; a failure only says so, since the sender's acknowledgement timer, not the
    /// report, decides what goes again.
    fn report_for(&self, updu: &[u8]) -> Report {
        Report {
            to: self.report.clone(),
            submission: tag(updu),
        }
    }

    /// Hands due messages to the sender when it has nothing queued; says when to look at the
    /// spool again.
    async fn refill(&mut self, target: &Target, st: &mut State) -> Look {
        let Some(mtu) = self.endpoint.mtu() else {
            return Look::Periodic;
        };
        let table = self.ctx.routes.current();
        let Some(peer) = table.peer(&self.name) else {
            return Look::Periodic;
        };
        if st.sender.is_none() {
            let mut settings = if peer.skywave {
                CftpSenderSettings {
                    max_bundle: self.ctx.config.cftp_bundle,
                    ..CftpSenderSettings::skywave(mtu, self.ctx.config.cftp_files_in_flight)
                }
            } else {
                CftpSenderSettings::standard(mtu)
            };
            settings.ack_timeout = self.ctx.config.reply_timeout;
            settings.delivery_timeout = self
                .endpoint
                .confirms()
                .then_some(self.ctx.config.delivery_timeout);
            match CftpSender::new(settings) {
                Ok(s) => st.sender = Some(s),
                Err(e) => {
                    warn!(error = %e, "cannot set up the CFTP sender");
                    return Look::Periodic;
                }
            }
        }
        let Some(sender) = st.sender.as_mut() else {
            return Look::Periodic;
        };
        if sender.queued() > 0 {
            return Look::Periodic;
        }
        let skip: Vec<String> = st.pushed.keys().cloned().collect();
        let loaded = match self.ctx.take_for(peer, target, skip).await {
            Take::Mail(l) => l,
            Take::Later(look) => return look,
        };
        if st.round.is_none() {
            st.round = Some(Round {
                start_unix: self.ctx.clock.unix_f64(),
                before: sender.stats(),
                messages: 0,
                accepted: 0,
            });
        }
        for (d, body) in loaded {
            // CFTP carries no DSN parameters.
            let m = super::batch_message(&d, body, false);
            match sender.push(m) {
                Ok(()) => {
                    st.pushed.insert(d.id.to_string(), d);
                }
                Err(e) => {
                    warn!(queue_id = %d.id, error = %e, "cannot make a CFTP file of the message");
                    self.ctx
                        .recorder
                        .defer_all(&d, format!("cannot make a CFTP file: {e}"))
                        .await;
                }
            }
        }
        Look::Periodic
    }

    /// Sends what the sender and receiver have, applies outcomes, spools received files.
    async fn pump(&mut self, st: &mut State) {
        let now = Instant::now().into_std();
        let prio = priority_5066(0);
        if let Some(sender) = st.sender.as_mut() {
            // Bounded by the files queued.
            while let Some(u) = sender.poll_transmit(now) {
                let report = self.report_for(&u);
                if let Err(e) = self.endpoint.send(self.node, prio, vec![u], Some(report)) {
                    debug!(error = %e, "SIS not bound; the file goes again after its timeout");
                }
            }
        }
        let mut outcomes: Vec<MessageResult> = Vec::new();
        if let Some(sender) = st.sender.as_mut() {
            while let Some(r) = sender.poll_outcome() {
                outcomes.push(r);
            }
        }
        // A file acknowledged says the peer hears us; one given up after its retries, that it
        // did not answer.
        let acknowledged = outcomes.iter().any(|r| {
            r.recipients
                .iter()
                .all(|(_, d)| matches!(d, Disposition::Delivered(_)))
        });
        if !outcomes.is_empty() {
            self.ctx.heard_from(&self.name, acknowledged);
        }
        for r in outcomes {
            let Some(d) = st.pushed.remove(&r.id) else {
                continue;
            };
            let delivered = r
                .recipients
                .iter()
                .all(|(_, d)| matches!(d, Disposition::Delivered(_)));
            if let Some(round) = st.round.as_mut() {
                round.messages += 1;
                round.accepted += u64::from(delivered);
            }
            let outcome = if delivered {
                // The mail-file carries no DSN parameters: success reports are ours.
                Outcome::Delivered(Handoff::Relayed)
            } else {
                Outcome::Deferred(format!(
                    "no acknowledgement from {} for the CFTP file; sent again later",
                    self.name
                ))
            };
            self.ctx
                .recorder
                .record(&d.id, &d.sender, d.size, d.recipients.clone(), outcome)
                .await;
        }
        self.close_round(st);
        self.receive_files(st).await;
        while let Some(ack) = st.receiver.poll_transmit() {
            if let Err(e) = self.endpoint.send(self.node, prio, vec![ack], None) {
                debug!(error = %e, "cannot send an acknowledgement; the peer sends the file again");
            }
        }
    }

    fn close_round(&self, st: &mut State) {
        let (Some(sender), Some(round)) = (st.sender.as_ref(), st.round.as_ref()) else {
            return;
        };
        if !sender.is_idle() || !st.pushed.is_empty() {
            return;
        }
        let after = sender.stats();
        let b = &round.before;
        self.ctx.transfers.record(TransferRecord {
            peer: self.name.clone(),
            protocol: "cftp".into(),
            direction: Direction::Out,
            start: round.start_unix,
            end: self.ctx.clock.unix_f64(),
            messages: round.messages,
            accepted: round.accepted,
            plain_bytes: after.bytes_plain - b.bytes_plain,
            wire_bytes: after.wire_bytes - b.wire_bytes,
            reply_plain_bytes: 0,
            reply_wire_bytes: 0,
            updus: after.updus - b.updus,
            transmissions: after.files - b.files + after.retransmitted_files
                - b.retransmitted_files,
            retransmissions: Some(after.retransmitted_files - b.retransmitted_files),
            result: if round.accepted == round.messages {
                "completed".into()
            } else {
                format!("{} of {} acknowledged", round.accepted, round.messages)
            },
        });
        st.round = None;
    }

    /// Takes a received file: the DSN for the recipients refused for good first (so a crash
    /// before the acknowledgement can send it twice, never zero times), then the message for
    /// the others. The id returned names what is now on disk.
    async fn receive_files(&mut self, st: &mut State) {
        // Bounded: each event is handled once.
        while let Some(event) = st.receiver.poll_event() {
            match event {
                CftpReceiverEvent::File(f) => {
                    let start = self.ctx.clock.unix_f64();
                    let mut policy = GatewayPolicy::new(
                        Source::Peer {
                            name: self.name.clone(),
                            identity: format!("{}/5066:{}", self.name, self.node),
                            link: "CFTP",
                        },
                        Arc::clone(&self.ctx.routes),
                    );
                    // CFTP cannot refuse: recipients refused for good are bounced by this
                    // gateway (the file is then acknowledged), a temporary refusal leaves the
                    // file unacknowledged so the peer sends it again later.
                    let Classified {
                        taken,
                        refused,
                        later,
                    } = classify(&mut policy, &f.mail.recipients);
                    let sender = f.mail.return_path.clone().unwrap_or_default();
                    let envelope = Envelope {
                        reverse_path: sender.clone(),
                        recipients: taken,
                        declared_size: Some(f.mail.message.len()),
                        body_type: BodyType::Unspecified,
                        mt_priority: None,
                        helo: self.name.clone(),
                        protocol: Protocol::Smtp,
                        auth_user: None,
                        // A CFTP mail-file has no place for DSN parameters.
                        dsn: Default::default(),
                        rcpt_dsn: Vec::new(),
                        smtputf8: false,
                    };
                    let stored = match later {
                        Some(why) => Err(why),
                        None => {
                            let reference = format!("cftp-{}-{}", self.name, f.mail.message_id);
                            self.ctx
                                .store_received(
                                    &reference,
                                    &policy,
                                    &envelope,
                                    &f.mail.message,
                                    refused,
                                )
                                .await
                        }
                    };
                    let now = Instant::now().into_std();
                    let size = f.mail.message.len() as u64;
                    let accepted = match stored {
                        Ok(id) => {
                            self.dedup.persist(&f.key);
                            info!(queued = %id, cftp_id = %f.mail.message_id, "received over HF (CFTP)");
                            if let Err(e) =
                                st.receiver.accepted(f.ticket, now, &mut self.dedup.cache)
                            {
                                warn!(error = %e, "CFTP bookkeeping failed");
                            }
                            true
                        }
                        Err(why) => {
                            warn!(cftp_id = %f.mail.message_id, reason = %why, "CFTP file not taken; not acknowledged, so the peer keeps it");
                            if let Err(e) =
                                st.receiver.deferred(f.ticket, now, &mut self.dedup.cache)
                            {
                                warn!(error = %e, "CFTP bookkeeping failed");
                            }
                            false
                        }
                    };
                    self.ctx.transfers.record(TransferRecord {
                        peer: self.name.clone(),
                        protocol: "cftp".into(),
                        direction: Direction::In,
                        start,
                        end: self.ctx.clock.unix_f64(),
                        messages: 1,
                        accepted: u64::from(accepted),
                        plain_bytes: size,
                        wire_bytes: 0,
                        reply_plain_bytes: 0,
                        reply_wire_bytes: 0,
                        updus: 0,
                        transmissions: 0,
                        retransmissions: None,
                        result: if accepted {
                            "acknowledged".into()
                        } else {
                            "not taken".into()
                        },
                    });
                }
                CftpReceiverEvent::Duplicate { message_id, .. } => {
                    info!(cftp_id = %message_id, "duplicate CFTP file: acknowledged and dropped");
                }
                CftpReceiverEvent::Dropped(e) => {
                    warn!(error = %e, "CFTP data dropped; the peer sends the file again");
                }
            }
        }
    }
}

/// The tag of a file's U_PDU in the endpoint's reports: its RCOP U_PDU id and segment number
/// (0 for what is no RCOP U_PDU, which the sender never hands out).
fn tag(updu: &[u8]) -> u64 {
    skywave_hmtp::cftp::RcopHeader::decode(updu).map_or(0, |(h, _)| {
        (u64::from(h.updu_id) << 16) | u64::from(h.segment)
    })
}

/// The U_PDU id and segment number of a [`tag`].
fn untag(tag: u64) -> (u8, u16) {
    (((tag >> 16) & 0xFF) as u8, (tag & 0xFFFF) as u16)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reports_tag_gives_back_the_updu_id_and_segment() {
        let mut updu = Vec::new();
        skywave_hmtp::cftp::RcopHeader {
            connection: 0,
            updu_id: 0xA7,
            segment: 0x1234,
        }
        .encode(&mut updu);
        updu.extend_from_slice(b"segment data");
        assert_eq!(untag(tag(&updu)), (0xA7, 0x1234));
        assert_eq!(tag(b"\x00"), 0, "too short for a header");
    }
}
