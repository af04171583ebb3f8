//! Tests of the on-disk queue: every operation, recovery, locking, concurrency and crashes.

use super::*;
use skywave_smtp::dsn::{Notify, Ret};
use std::collections::BTreeMap;

const T0: u64 = 1_800_000_000;

fn peer(name: &str) -> Target {
    Target::Peer(name.into())
}

fn open(dir: &Path) -> Spool {
    open_with(
        dir,
        SpoolConfig {
            reporting_mta: "ship.example".into(),
            ..SpoolConfig::default()
        },
    )
}

fn open_with(dir: &Path, config: SpoolConfig) -> Spool {
    Spool::open(dir, config).unwrap().0
}

fn msg(subject: &str) -> Vec<u8> {
    format!("From: alice@ship.example\r\nSubject: {subject}\r\n\r\nbody of {subject}\r\n")
        .into_bytes()
}

fn enqueue(s: &Spool, subject: &str, rcpts: &[(&str, Target)], prio: i8, now: u64) -> QueueId {
    let body = msg(subject);
    s.enqueue(
        &NewMessage {
            sender: "alice@ship.example".into(),
            recipients: rcpts
                .iter()
                .map(|(a, t)| (a.to_string(), t.clone()))
                .collect(),
            priority: Priority::new(prio).unwrap(),
            message: &body,
            dsn: Default::default(),
            rcpt_dsn: Vec::new(),
            origin: None,
        },
        now,
    )
    .unwrap()
}

/// The failure of the first recipient of `id`, which must have failed.
fn first_failure(s: &Spool, id: &QueueId) -> Failure {
    let env = s.load(id).unwrap().1.envelope;
    match &env.recipients[0].state {
        RcptState::Failed(f) => f.clone(),
        _ => panic!("not failed: {env:?}"),
    }
}

/// Bounces `id` to the LAN at `now`: the DSN's id and text.
fn bounce_to_lan(s: &Spool, id: &QueueId, now: u64) -> (QueueId, String) {
    let dsn = s.bounce(id, Target::Lan, now).unwrap().unwrap().dsn;
    let text = String::from_utf8(s.load(&dsn).unwrap().1.message).unwrap();
    (dsn, text)
}

fn ids(due: &[DueMessage]) -> Vec<QueueId> {
    due.iter().map(|d| d.id.clone()).collect()
}

/// Every file in the three queue directories, by name, with the directories it appears in.
fn on_disk(root: &Path) -> BTreeMap<String, Vec<QueueState>> {
    let mut out: BTreeMap<String, Vec<QueueState>> = BTreeMap::new();
    for state in QueueState::ALL {
        for e in fs::read_dir(root.join(state.dir())).unwrap() {
            out.entry(e.unwrap().file_name().into_string().unwrap())
                .or_default()
                .push(state);
        }
    }
    out
}

#[test]
fn enqueue_is_durable_and_complete() {
    let dir = tempfile::tempdir().unwrap();
    let s = open(dir.path());
    let id = enqueue(
        &s,
        "one",
        &[
            ("bob@shore.example", peer("shore")),
            ("carol@lan.example", Target::Lan),
        ],
        0,
        T0,
    );
    assert!(dir.path().join("queue").join(id.as_str()).is_file());
    assert_eq!(fs::read_dir(dir.path().join("tmp")).unwrap().count(), 0);
    let (state, file) = s.load(&id).unwrap();
    assert_eq!(state, QueueState::Queued);
    assert_eq!(file.message, msg("one"));
    assert_eq!(file.envelope.arrival, T0);
    assert_eq!(file.envelope.expires, T0 + 5 * 86_400);
    assert_eq!(file.envelope.recipients.len(), 2);
    assert!(
        file.envelope
            .recipients
            .iter()
            .all(|r| r.state == RcptState::Pending)
    );
    assert!(matches!(
        s.enqueue(
            &NewMessage {
                sender: "a".into(),
                recipients: vec![],
                priority: Priority::NORMAL,
                message: b"x",
                dsn: Default::default(),
                rcpt_dsn: Vec::new(),
                origin: None,
            },
            T0
        ),
        Err(Error::NoRecipients)
    ));
}

#[test]
fn due_orders_by_priority_then_age_within_budget() {
    let dir = tempfile::tempdir().unwrap();
    let s = open(dir.path());
    let shore = peer("shore");
    let old_low = enqueue(&s, "old low", &[("a@x", shore.clone())], -2, T0);
    let new_high = enqueue(&s, "new high", &[("b@x", shore.clone())], 4, T0 + 10);
    let old_high = enqueue(&s, "old high", &[("c@x", shore.clone())], 4, T0 + 5);
    let _lan = enqueue(&s, "lan", &[("d@y", Target::Lan)], 9, T0);
    let all = s.due(&shore, T0 + 20, u64::MAX).unwrap();
    assert_eq!(
        ids(&all),
        vec![old_high.clone(), new_high.clone(), old_low.clone()]
    );
    assert_eq!(all[0].recipients, vec!["c@x".to_string()]);
    // Budget: the first always goes, then stop at the first that does not fit.
    let size = all[0].size;
    assert_eq!(
        ids(&s.due(&shore, T0 + 20, 1).unwrap()),
        vec![old_high.clone()]
    );
    assert_eq!(ids(&s.due(&shore, T0 + 20, 2 * size + 1).unwrap()).len(), 2);
    assert_eq!(s.due(&peer("other"), T0 + 20, u64::MAX).unwrap(), vec![]);
    assert_eq!(s.due(&Target::Lan, T0 + 20, u64::MAX).unwrap().len(), 1);
    // In flight: not due again.
    s.mark_in_flight(&old_high, &["c@x"], T0 + 20).unwrap();
    assert_eq!(
        ids(&s.due(&shore, T0 + 20, u64::MAX).unwrap()),
        vec![new_high, old_low]
    );
}

#[test]
fn delivery_per_recipient_and_removal_when_done() {
    let dir = tempfile::tempdir().unwrap();
    let s = open(dir.path());
    let id = enqueue(
        &s,
        "two",
        &[("b@x", peer("shore")), ("c@y", Target::Lan)],
        0,
        T0,
    );
    s.mark_in_flight(&id, &["b@x"], T0 + 1).unwrap();
    assert_eq!(
        s.load(&id).unwrap().1.envelope.recipients[0].state,
        RcptState::InFlight
    );
    assert_eq!(
        s.delivered(&id, &["b@x"], Handoff::Passed, T0 + 2).unwrap(),
        Disposition::Queued
    );
    let env = s.load(&id).unwrap().1.envelope;
    assert_eq!(env.recipients[0].state, RcptState::Delivered { at: T0 + 2 });
    assert_eq!(env.recipients[0].attempts, 1);
    assert!(s.due(&peer("shore"), T0 + 3, u64::MAX).unwrap().is_empty());
    assert_eq!(
        s.delivered(&id, &["c@y"], Handoff::Passed, T0 + 3).unwrap(),
        Disposition::Done
    );
    assert!(matches!(s.load(&id), Err(Error::NotFound(_))));
    assert!(matches!(
        s.delivered(&id, &["c@y"], Handoff::Passed, T0 + 3),
        Err(Error::NotFound(_))
    ));
}

#[test]
fn deferral_backs_off_exponentially_and_link_up_retries_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let s = open(dir.path());
    let shore = peer("shore");
    let id = enqueue(
        &s,
        "d",
        &[("b@x", shore.clone()), ("c@y", Target::Lan)],
        0,
        T0,
    );
    let mut now = T0;
    let mut delays = Vec::new();
    for _ in 0..7 {
        s.mark_in_flight(&id, &["b@x"], now).unwrap();
        assert_eq!(
            s.deferred(&id, &["b@x"], "421 4.4.2 link lost", now)
                .unwrap(),
            Disposition::Queued
        );
        let r = &s.load(&id).unwrap().1.envelope.recipients[0];
        assert_eq!(r.state, RcptState::Deferred);
        assert_eq!(r.last_error.as_deref(), Some("421 4.4.2 link lost"));
        let delay = r.next_attempt - now;
        delays.push(delay);
        assert!(s.due(&shore, now + delay - 1, u64::MAX).unwrap().is_empty());
        assert_eq!(
            ids(&s.due(&shore, now + delay, u64::MAX).unwrap()),
            vec![id.clone()]
        );
        now += delay;
    }
    assert_eq!(delays, vec![300, 600, 1200, 2400, 4000, 4000, 4000]);
    assert_eq!(s.next_due(&shore).unwrap(), Some(now));
    // Deferred again; the link to another peer coming back changes nothing...
    s.deferred(&id, &["b@x"], "421 again", now).unwrap();
    s.link_up(&peer("other"), now + 1);
    assert!(s.due(&shore, now + 2, u64::MAX).unwrap().is_empty());
    // ...this peer's link coming back makes it due at once...
    s.link_up(&shore, now + 2);
    assert_eq!(
        ids(&s.due(&shore, now + 2, u64::MAX).unwrap()),
        vec![id.clone()]
    );
    // ...but a failure after the link came up waits for its backoff again.
    s.deferred(&id, &["b@x"], "421 still", now + 3).unwrap();
    assert!(s.due(&shore, now + 4, u64::MAX).unwrap().is_empty());
}

#[test]
fn failure_leads_to_a_dsn_to_the_sender_and_none_for_bounces() {
    let dir = tempfile::tempdir().unwrap();
    let s = open(dir.path());
    let id = enqueue(
        &s,
        "f",
        &[("b@x", peer("shore")), ("c@y", Target::Lan)],
        2,
        T0,
    );
    assert_eq!(
        s.failed(&id, &["b@x"], "5.1.1", "550 5.1.1 no such user", T0 + 1)
            .unwrap(),
        Disposition::Queued
    );
    assert_eq!(
        s.delivered(&id, &["c@y"], Handoff::Passed, T0 + 2).unwrap(),
        Disposition::NeedsBounce
    );
    assert_eq!(
        s.pending_bounces().unwrap(),
        vec![(id.clone(), "alice@ship.example".to_string())]
    );
    let dsn_id = s.bounce(&id, Target::Lan, T0 + 3).unwrap().unwrap().dsn;
    assert!(matches!(s.load(&id), Err(Error::NotFound(_))));
    assert!(s.pending_bounces().unwrap().is_empty());
    let (_, dsn) = s.load(&dsn_id).unwrap();
    assert_eq!(dsn.envelope.sender, "");
    assert_eq!(dsn.envelope.recipients[0].address, "alice@ship.example");
    assert_eq!(dsn.envelope.priority.value(), 2);
    let text = String::from_utf8(dsn.message.clone()).unwrap();
    assert!(text.contains("report-type=delivery-status"));
    assert!(text.contains("Final-Recipient: rfc822; b@x\r\nAction: failed\r\nStatus: 5.1.1\r\n"));
    assert!(!text.contains("c@y"));
    assert!(text.contains("Subject: f\r\n"));
    // The DSN itself fails: no DSN about a DSN.
    assert_eq!(
        s.failed(
            &dsn_id,
            &["alice@ship.example"],
            "5.1.1",
            "550 unknown",
            T0 + 4
        )
        .unwrap(),
        Disposition::Done
    );
    assert!(on_disk(dir.path()).is_empty());
}

#[test]
fn expiry_fails_waiting_recipients_with_4_4_7() {
    let dir = tempfile::tempdir().unwrap();
    let s = open_with(
        dir.path(),
        SpoolConfig {
            max_lifetime: 1000,
            ..SpoolConfig::default()
        },
    );
    let a = enqueue(
        &s,
        "a",
        &[("b@x", peer("shore")), ("c@y", Target::Lan)],
        0,
        T0,
    );
    let held = enqueue(&s, "h", &[("b@x", peer("shore"))], 0, T0);
    let young = enqueue(&s, "y", &[("b@x", peer("shore"))], 0, T0 + 500);
    s.hold(&held).unwrap();
    s.delivered(&a, &["c@y"], Handoff::Passed, T0 + 10).unwrap();
    s.deferred(&a, &["b@x"], "421 no link", T0 + 20).unwrap();
    assert!(s.expire(T0 + 999).unwrap().is_empty());
    assert_eq!(
        s.expire(T0 + 1000).unwrap(),
        vec![(a.clone(), Disposition::NeedsBounce)]
    );
    let f = first_failure(&s, &a);
    assert_eq!(f.status, "4.4.7");
    assert!(
        f.diagnostic.contains("expired") && f.diagnostic.contains("421 no link"),
        "{}",
        f.diagnostic
    );
    assert_eq!(s.load(&held).unwrap().0, QueueState::Held);
    assert_eq!(
        s.load(&young).unwrap().1.envelope.recipients[0].state,
        RcptState::Pending
    );
    let (_, text) = bounce_to_lan(&s, &a, T0 + 1001);
    assert!(text.contains("Status: 4.4.7\r\n"));
}

/// A message whose header says when it expires, from alice to `rcpts`.
fn enqueue_expiring(s: &Spool, expires: &str, rcpts: &[(&str, Target)], now: u64) -> QueueId {
    let body =
        format!("From: alice@ship.example\r\nExpires: {expires}\r\nSubject: wx\r\n\r\nwx\r\n");
    s.enqueue(
        &NewMessage {
            sender: "alice@ship.example".into(),
            recipients: rcpts
                .iter()
                .map(|(a, t)| (a.to_string(), t.clone()))
                .collect(),
            priority: Priority::NORMAL,
            message: body.as_bytes(),
            dsn: Default::default(),
            rcpt_dsn: Vec::new(),
            origin: None,
        },
        now,
    )
    .unwrap()
}

#[test]
fn a_message_past_its_own_expiry_is_never_sent_and_fails_with_5_4_7() {
    let dir = tempfile::tempdir().unwrap();
    let s = open(dir.path());
    let shore = peer("shore");
    // T0 + 200 s, written with a zone an hour east of UTC.
    let at = crate::dsn::rfc5322_date(T0 + 200 + 3600).replace("+0000", "+0100");
    let wx = enqueue_expiring(&s, &at, &[("ops@shore.example", shore.clone())], T0);
    let plain = enqueue(&s, "plain", &[("ops@shore.example", shore.clone())], 0, T0);
    assert_eq!(s.load(&wx).unwrap().1.envelope.expires, T0 + 200);
    assert_eq!(s.load(&plain).unwrap().1.envelope.expires, T0 + 5 * 86_400);
    // The first attempt: the plain one goes, the expiring one meets a lost link.
    assert_eq!(s.due(&shore, T0, u64::MAX).unwrap().len(), 2);
    for id in [&wx, &plain] {
        s.mark_in_flight(id, &["ops@shore.example"], T0).unwrap();
    }
    s.delivered(&plain, &["ops@shore.example"], Handoff::Passed, T0)
        .unwrap();
    s.deferred(&wx, &["ops@shore.example"], "421 link lost", T0)
        .unwrap();
    // Its retry (T0 + 300) lies after its expiry: nothing is to wake the link for.
    assert_eq!(s.next_due(&shore).unwrap(), None);
    // The link comes back before the expiry: it goes; from the expiry on it does not, before
    // the sweep has failed it or after.
    s.link_up(&shore, T0 + 199);
    assert_eq!(
        ids(&s.due(&shore, T0 + 199, u64::MAX).unwrap()),
        vec![wx.clone()]
    );
    assert!(s.due(&shore, T0 + 200, u64::MAX).unwrap().is_empty());
    // Recovery still finds it (a cut-off round may have carried it).
    assert_eq!(ids(&s.waiting(&shore).unwrap()), vec![wx.clone()]);
    assert_eq!(
        s.expire(T0 + 200).unwrap(),
        vec![(wx.clone(), Disposition::NeedsBounce)]
    );
    let f = first_failure(&s, &wx);
    assert_eq!(f.status, "5.4.7");
    assert!(
        f.diagnostic.starts_with("the message's own expiry time (")
            && f.diagnostic.contains("421 link lost"),
        "{}",
        f.diagnostic
    );
    let (dsn, text) = bounce_to_lan(&s, &wx, T0 + 201);
    assert!(text.contains("Status: 5.4.7\r\n"), "{text}");
    // The DSN itself does not carry the original's expiry: it lives the spool's lifetime.
    assert_eq!(
        s.load(&dsn).unwrap().1.envelope.expires,
        T0 + 201 + 5 * 86_400
    );
    // A stated expiry beyond the lifetime changes nothing, nor does one that does not parse.
    let far = enqueue_expiring(&s, "1 Jan 2100 00:00 +0000", &[("b@x", shore.clone())], T0);
    let bad = enqueue_expiring(&s, "when the sun sets", &[("b@x", shore)], T0);
    for id in [far, bad] {
        assert_eq!(s.load(&id).unwrap().1.envelope.expires, T0 + 5 * 86_400);
    }
}

#[test]
fn hold_release_delete_and_flush() {
    let dir = tempfile::tempdir().unwrap();
    let s = open(dir.path());
    let shore = peer("shore");
    let a = enqueue(&s, "a", &[("b@x", shore.clone())], 0, T0);
    let b = enqueue(&s, "b", &[("b@x", shore.clone())], 0, T0);
    let c = enqueue(&s, "c", &[("c@y", Target::Lan)], 0, T0);
    s.hold(&a).unwrap();
    s.hold(&a).unwrap();
    assert!(dir.path().join("hold").join(a.as_str()).is_file());
    assert_eq!(ids(&s.due(&shore, T0, u64::MAX).unwrap()), vec![b.clone()]);
    s.release(&a).unwrap();
    assert_eq!(s.due(&shore, T0, u64::MAX).unwrap().len(), 2);
    assert_eq!(s.delete(&b).unwrap(), QueueState::Queued);
    assert!(matches!(s.delete(&b), Err(Error::NotFound(_))));
    // Flush: deferred mail is due now, only for the target asked for.
    s.deferred(&a, &["b@x"], "421", T0).unwrap();
    s.deferred(&c, &["c@y"], "421", T0).unwrap();
    assert!(s.due(&shore, T0 + 1, u64::MAX).unwrap().is_empty());
    assert_eq!(s.flush(Some(&shore)).unwrap(), 1);
    assert_eq!(
        ids(&s.due(&shore, T0 + 1, u64::MAX).unwrap()),
        vec![a.clone()]
    );
    assert!(s.due(&Target::Lan, T0 + 1, u64::MAX).unwrap().is_empty());
    assert_eq!(s.flush(None).unwrap(), 1);
    assert_eq!(
        ids(&s.due(&Target::Lan, T0 + 1, u64::MAX).unwrap()),
        vec![c]
    );
}

#[test]
fn held_targets_are_never_due_and_survive_restart() {
    let dir = tempfile::tempdir().unwrap();
    let shore = peer("shore/../weird name");
    {
        let s = open(dir.path());
        enqueue(&s, "a", &[("b@x", shore.clone())], 0, T0);
        s.hold_target(&shore).unwrap();
        s.hold_target(&shore).unwrap();
        assert!(s.due(&shore, T0, u64::MAX).unwrap().is_empty());
        assert_eq!(s.next_due(&shore).unwrap(), None);
    }
    let s = open(dir.path());
    assert_eq!(s.held_targets().unwrap(), vec![shore.clone()]);
    assert!(s.due(&shore, T0, u64::MAX).unwrap().is_empty());
    s.release_target(&shore).unwrap();
    s.release_target(&shore).unwrap();
    assert_eq!(s.due(&shore, T0, u64::MAX).unwrap().len(), 1);
    assert!(s.held_targets().unwrap().is_empty());
}

#[test]
fn a_deferral_due_now_is_due_at_once_and_counts_its_attempt() {
    let dir = tempfile::tempdir().unwrap();
    let s = open_with(
        dir.path(),
        SpoolConfig {
            max_attempts: 2,
            ..SpoolConfig::default()
        },
    );
    let shore = peer("shore");
    let id = enqueue(&s, "a", &[("b@x", shore.clone())], 0, T0);
    s.mark_in_flight(&id, &["b@x"], T0).unwrap();
    assert_eq!(
        s.deferred_due_now(&id, &["b@x"], "555 BODY= not offered", T0 + 5)
            .unwrap(),
        Disposition::Queued
    );
    let (_, file) = s.load(&id).unwrap();
    let r = &file.envelope.recipients[0];
    assert_eq!((r.attempts, r.next_attempt), (1, T0 + 5));
    assert_eq!(
        ids(&s.due(&shore, T0 + 5, 1 << 20).unwrap()),
        vec![id.clone()]
    );
    // A next hop that keeps refusing still meets the attempt limit.
    s.mark_in_flight(&id, &["b@x"], T0 + 6).unwrap();
    assert!(matches!(
        s.deferred_due_now(&id, &["b@x"], "555 again", T0 + 7)
            .unwrap(),
        Disposition::Dead(_)
    ));
}

#[test]
fn too_many_attempts_make_a_dead_letter_that_can_be_revived() {
    let dir = tempfile::tempdir().unwrap();
    let s = open_with(
        dir.path(),
        SpoolConfig {
            max_attempts: 3,
            ..SpoolConfig::default()
        },
    );
    let shore = peer("shore");
    let id = enqueue(&s, "a", &[("b@x", shore.clone())], 0, T0);
    assert_eq!(
        s.deferred(&id, &["b@x"], "421 one", T0).unwrap(),
        Disposition::Queued
    );
    assert_eq!(
        s.deferred(&id, &["b@x"], "421 two", T0).unwrap(),
        Disposition::Queued
    );
    let Disposition::Dead(reason) = s.deferred(&id, &["b@x"], "421 three", T0).unwrap() else {
        panic!("not dead")
    };
    assert!(
        reason.contains("3 attempts") && reason.contains("421 three"),
        "{reason}"
    );
    assert_eq!(s.load(&id).unwrap().0, QueueState::Dead);
    s.flush(None).unwrap();
    assert!(s.due(&shore, T0 + 100_000, u64::MAX).unwrap().is_empty());
    let listed: Vec<Entry> = s.entries().unwrap().map(|e| e.unwrap()).collect();
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].state, QueueState::Dead);
    assert_eq!(listed[0].problem.as_deref(), Some(reason.as_str()));
    assert!(matches!(s.hold(&id), Err(Error::WrongState { .. })));
    s.release(&id).unwrap();
    let (state, file) = s.load(&id).unwrap();
    assert_eq!(state, QueueState::Queued);
    assert_eq!(file.envelope.dead_reason, None);
    assert_eq!(file.envelope.recipients[0].attempts, 0);
    assert_eq!(ids(&s.due(&shore, T0, u64::MAX).unwrap()), vec![id]);
}

#[test]
fn corrupt_files_go_to_dead_with_the_reason() {
    let dir = tempfile::tempdir().unwrap();
    let s = open(dir.path());
    let id = enqueue(&s, "a", &[("b@x", peer("shore"))], 0, T0);
    let good = enqueue(&s, "b", &[("b@x", peer("shore"))], 0, T0);
    let path = dir.path().join("queue").join(id.as_str());
    let mut bytes = fs::read(&path).unwrap();
    let n = bytes.len();
    bytes[n - 20] ^= 0xFF;
    fs::write(&path, &bytes).unwrap();
    // A scan finds it and takes it out of circulation; the good message is unaffected.
    assert_eq!(
        ids(&s.due(&peer("shore"), T0, u64::MAX).unwrap()),
        vec![good.clone()]
    );
    assert!(dir.path().join("dead").join(id.as_str()).is_file());
    let dead: Vec<Entry> = s
        .entries()
        .unwrap()
        .map(|e| e.unwrap())
        .filter(|e| e.state == QueueState::Dead)
        .collect();
    assert_eq!(dead.len(), 1);
    assert!(dead[0].envelope.is_none());
    assert!(
        dead[0]
            .problem
            .as_deref()
            .unwrap_or("")
            .contains("checksum"),
        "{:?}",
        dead[0].problem
    );
    assert!(matches!(s.load(&id), Err(Error::Corrupt { .. })));
    // Found at start-up too, and a stray file with a bad name as well.
    fs::write(dir.path().join("queue").join("garbage.txt"), b"hello").unwrap();
    fs::write(
        dir.path().join("queue").join(good.as_str()),
        &bytes[..n / 2],
    )
    .unwrap();
    drop(s);
    let (s, report) = Spool::open(dir.path(), SpoolConfig::default()).unwrap();
    assert_eq!(report.moved_to_dead.len(), 2, "{report:?}");
    assert!(
        s.entries()
            .unwrap()
            .all(|e| e.unwrap().state == QueueState::Dead)
    );
    // The operator can delete a corrupt file.
    s.delete(&id).unwrap();
}

#[test]
fn recovery_removes_tmp_and_requeues_in_flight() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b);
    {
        let s = open(dir.path());
        a = enqueue(
            &s,
            "a",
            &[("b@x", peer("shore")), ("c@y", Target::Lan)],
            0,
            T0,
        );
        b = enqueue(&s, "b", &[("b@x", peer("shore"))], 0, T0);
        s.mark_in_flight(&a, &["b@x"], T0).unwrap();
        s.mark_in_flight(&b, &["b@x"], T0).unwrap();
        fs::write(
            dir.path().join("tmp").join("half-written.tmp"),
            b"SKWSPL01\x01\x00",
        )
        .unwrap();
        assert!(s.due(&peer("shore"), T0, u64::MAX).unwrap().is_empty());
    }
    let (s, report) = Spool::open(dir.path(), SpoolConfig::default()).unwrap();
    assert_eq!(report.removed_tmp, 1);
    assert_eq!(report.requeued_in_flight, vec![a.clone(), b.clone()]);
    assert_eq!(fs::read_dir(dir.path().join("tmp")).unwrap().count(), 0);
    assert_eq!(
        ids(&s.due(&peer("shore"), T0, u64::MAX).unwrap()),
        vec![a.clone(), b]
    );
    // The interrupted attempt still counts.
    assert_eq!(s.load(&a).unwrap().1.envelope.recipients[0].attempts, 1);
}

#[test]
fn one_owner_and_any_number_of_admins() {
    let dir = tempfile::tempdir().unwrap();
    assert!(matches!(
        Spool::open_admin(dir.path(), SpoolConfig::default()),
        Err(Error::NotASpool(_))
    ));
    let gw = open(dir.path());
    assert!(matches!(
        Spool::open(dir.path(), SpoolConfig::default()),
        Err(Error::Busy(_))
    ));
    let admin = Spool::open_admin(dir.path(), SpoolConfig::default()).unwrap();
    assert!(admin.owned_elsewhere().unwrap());
    assert!(!gw.owned_elsewhere().unwrap());
    let shore = peer("shore");
    let id = enqueue(&gw, "a", &[("b@x", shore.clone())], 0, T0);
    assert_eq!(gw.due(&shore, T0, u64::MAX).unwrap().len(), 1);
    // The CLI holds it: the gateway (with its envelope cache) sees that at once.
    admin.hold(&id).unwrap();
    assert!(gw.due(&shore, T0, u64::MAX).unwrap().is_empty());
    admin.release(&id).unwrap();
    gw.deferred(&id, &["b@x"], "421", T0).unwrap();
    assert!(gw.due(&shore, T0, u64::MAX).unwrap().is_empty());
    admin.flush(None).unwrap();
    assert_eq!(gw.due(&shore, T0, u64::MAX).unwrap().len(), 1);
    let listed: Vec<Entry> = admin.entries().unwrap().map(|e| e.unwrap()).collect();
    assert_eq!(listed.len(), 1);
    let env = listed[0].envelope.as_ref().unwrap();
    assert_eq!(env.recipients[0].state, RcptState::Deferred);
    assert_eq!(env.last_error(), Some("421"));
    assert_eq!(env.age(T0 + 10), 10);
    assert_eq!(env.next_attempt(), Some(0)); // flushed
    assert_eq!(env.attempts(), 1);
    drop(gw);
    assert!(!admin.owned_elsewhere().unwrap());
    let (_gw2, _) = Spool::open(dir.path(), SpoolConfig::default()).unwrap();
}

#[test]
fn a_thousand_enqueues_from_eight_threads_all_land() {
    let dir = tempfile::tempdir().unwrap();
    let s = Arc::new(open(dir.path()));
    let handles: Vec<_> = (0..8)
        .map(|t| {
            let s = s.clone();
            std::thread::spawn(move || {
                (0..125)
                    .map(|i| {
                        enqueue(
                            &s,
                            &format!("t{t} m{i}"),
                            &[("b@x", Target::Lan)],
                            (i % 19) as i8 - 9,
                            T0,
                        )
                    })
                    .collect::<Vec<_>>()
            })
        })
        .collect();
    let mut all: Vec<QueueId> = handles
        .into_iter()
        .flat_map(|h| h.join().unwrap())
        .collect();
    all.sort();
    all.dedup();
    assert_eq!(all.len(), 1000);
    let disk = on_disk(dir.path());
    assert_eq!(disk.len(), 1000);
    assert!(
        all.iter()
            .all(|id| disk.get(id.as_str()) == Some(&vec![QueueState::Queued]))
    );
    let due = s.due(&Target::Lan, T0, u64::MAX).unwrap();
    assert_eq!(due.len(), 1000);
    assert!(due.windows(2).all(|w| w[0].priority >= w[1].priority));
}

/// Status updates write and sync the new file outside the lock (`update_pure`); updates of one
/// message racing from eight threads, each for its own recipients, must all survive: no update
/// may be based on a version of the file another one has replaced.
#[test]
fn racing_updates_of_one_message_lose_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let s = Arc::new(open(dir.path()));
    let rcpts: Vec<String> = (0..16).map(|i| format!("r{i}@x")).collect();
    let pairs: Vec<(&str, Target)> = rcpts.iter().map(|r| (r.as_str(), Target::Lan)).collect();
    for round in 0..5 {
        let id = enqueue(&s, &format!("race {round}"), &pairs, 0, T0);
        let handles: Vec<_> = (0..8)
            .map(|t| {
                let s = s.clone();
                let id = id.clone();
                let mine = [rcpts[2 * t].clone(), rcpts[2 * t + 1].clone()];
                std::thread::spawn(move || {
                    s.mark_in_flight(&id, &mine, T0).unwrap();
                    s.deferred(&id, &mine[..1], "421 later", T0).unwrap();
                })
            })
            .collect();
        for h in handles {
            h.join().unwrap();
        }
        let (_, file) = s.load(&id).unwrap();
        for (i, r) in file.envelope.recipients.iter().enumerate() {
            assert_eq!(r.attempts, 1, "{}", r.address);
            let want = if i % 2 == 0 {
                RcptState::Deferred
            } else {
                RcptState::InFlight
            };
            assert_eq!(r.state, want, "{}", r.address);
        }
        // Nothing staged was left behind.
        assert_eq!(fs::read_dir(dir.path().join(TMP)).unwrap().count(), 0);
    }
}

// ---- crash safety ---------------------------------------------------------------------------

/// Checks the invariants after recovery: every file decodes, sits in exactly one directory, in
/// the directory its content says, with nothing in flight and `tmp/` empty.
fn check_consistent(root: &Path) -> Spool {
    let (s, _) = Spool::open(root, SpoolConfig::default()).unwrap();
    assert_eq!(fs::read_dir(root.join("tmp")).unwrap().count(), 0);
    for (name, states) in on_disk(root) {
        assert_eq!(states.len(), 1, "{name} in {states:?}");
        let (state, file) = s.load(&QueueId::parse(&name).unwrap()).unwrap();
        assert_eq!(
            state == QueueState::Dead,
            file.envelope.dead_reason.is_some()
        );
        assert!(
            file.envelope
                .recipients
                .iter()
                .all(|r| r.state != RcptState::InFlight)
        );
    }
    s
}

#[test]
fn crash_at_every_step_of_enqueue_keeps_exactly_the_acknowledged_messages() {
    for crash_at in 1..=8 {
        let dir = tempfile::tempdir().unwrap();
        let mut acked = Vec::new();
        let interrupted;
        {
            let s = open(dir.path());
            acked.push(enqueue(&s, "before", &[("b@x", Target::Lan)], 0, T0));
            s.crash_after(crash_at);
            let body = msg("during");
            let r = s.enqueue(
                &NewMessage {
                    sender: "alice@ship.example".into(),
                    recipients: vec![("b@x".into(), Target::Lan)],
                    priority: Priority::NORMAL,
                    message: &body,
                    dsn: Default::default(),
                    rcpt_dsn: Vec::new(),
                    origin: None,
                },
                T0,
            );
            match r {
                Ok(id) => acked.push(id),
                Err(Error::SimulatedCrash(_)) => {}
                Err(e) => panic!("unexpected error {e}"),
            }
            interrupted = s.crashed.load(Ordering::SeqCst);
            // Everything after the crash fails: the process is dead.
            if interrupted {
                assert!(matches!(
                    s.delivered(&acked[0], &["b@x"], Handoff::Passed, T0),
                    Err(Error::SimulatedCrash(_))
                ));
            }
        }
        let s = check_consistent(dir.path());
        let present: Vec<QueueId> = s
            .entries()
            .unwrap()
            .map(|e| e.unwrap().envelope.unwrap().id.clone())
            .collect();
        for id in &acked {
            assert!(
                present.contains(id),
                "crash at step {crash_at}: acknowledged {id} lost"
            );
        }
        // At most the one interrupted message may also be there (the SMTP client saw no 250 and
        // will send it again: a duplicate at worst, never a loss).
        assert!(
            present.len() <= acked.len() + 1,
            "crash at step {crash_at}: {present:?} vs {acked:?}"
        );
        if !interrupted {
            assert_eq!(present.len(), 2);
        }
        // Steps: create, write, sync, rename, sync directory; a crash at each of them is tried.
        assert_eq!(interrupted, crash_at <= 5, "crash at step {crash_at}");
    }
}

/// Runs `op` on a spool prepared by `setup`, crashing at step 1, 2, ... until the operation
/// completes without crashing; after each crash, recovery must leave a consistent spool in which
/// `check` holds.
fn crash_every_step(
    name: &str,
    setup: impl Fn(&Spool) -> QueueId,
    op: impl Fn(&Spool, &QueueId) -> Result<()>,
    check: impl Fn(&Spool, &QueueId, u64),
) {
    for (crashes, crash_at) in (1..=40).enumerate() {
        let dir = tempfile::tempdir().unwrap();
        let completed;
        let id;
        {
            let s = open(dir.path());
            id = setup(&s);
            s.crash_after(crash_at);
            match op(&s, &id) {
                Ok(()) => completed = !s.crashed.load(Ordering::SeqCst),
                Err(Error::SimulatedCrash(_)) => completed = false,
                Err(e) => panic!("{name}: unexpected error {e}"),
            }
        }
        let s = check_consistent(dir.path());
        check(&s, &id, crash_at);
        if completed {
            assert!(
                crashes >= 2,
                "{name}: only {crashes} crash points exercised"
            );
            return;
        }
    }
    panic!("{name}: did not complete within 40 steps");
}

#[test]
fn crash_during_state_changes_loses_nothing() {
    let setup = |s: &Spool| {
        let id = enqueue(
            s,
            "x",
            &[("b@x", peer("shore")), ("c@y", Target::Lan)],
            0,
            T0,
        );
        s.mark_in_flight(&id, &["b@x"], T0).unwrap();
        id
    };
    // Present, with `b@x` in one of the allowed states.
    let rcpt_state_in = |allowed: &'static [&'static str]| {
        move |s: &Spool, id: &QueueId, k: u64| {
            let (_, f) = s.load(id).unwrap_or_else(|e| panic!("step {k}: {e}"));
            let st = f.envelope.recipients[0].state.name();
            assert!(
                allowed.contains(&st),
                "step {k}: b@x is {st}, allowed {allowed:?}"
            );
        }
    };
    crash_every_step(
        "mark_in_flight",
        setup,
        |s, id| s.mark_in_flight(id, &["c@y"], T0 + 1),
        rcpt_state_in(&["pending"]),
    );
    crash_every_step(
        "delivered",
        setup,
        |s, id| s.delivered(id, &["b@x"], Handoff::Passed, T0 + 1).map(drop),
        rcpt_state_in(&["pending", "delivered"]),
    );
    crash_every_step(
        "deferred",
        setup,
        |s, id| s.deferred(id, &["b@x"], "421", T0 + 1).map(drop),
        rcpt_state_in(&["pending", "deferred"]),
    );
    crash_every_step(
        "hold",
        setup,
        |s, id| s.hold(id),
        rcpt_state_in(&["pending"]),
    );
    // Delivering the last recipient removes the file: before, it is there; after, it is gone.
    crash_every_step(
        "delivered last",
        |s| {
            let id = setup(s);
            s.delivered(&id, &["c@y"], Handoff::Passed, T0).unwrap();
            id
        },
        |s, id| s.delivered(id, &["b@x"], Handoff::Passed, T0 + 1).map(drop),
        |s, id, k| match s.load(id) {
            Ok((_, f)) => assert_eq!(
                f.envelope.recipients[0].state,
                RcptState::Pending,
                "step {k}"
            ),
            Err(Error::NotFound(_)) => {}
            Err(e) => panic!("step {k}: {e}"),
        },
    );
}

#[test]
fn crash_while_moving_to_and_from_dead_is_finished_by_recovery() {
    let config = SpoolConfig {
        max_attempts: 1,
        ..SpoolConfig::default()
    };
    for crash_at in 1..=20 {
        let dir = tempfile::tempdir().unwrap();
        let id;
        {
            let s = open_with(dir.path(), config.clone());
            id = enqueue(&s, "x", &[("b@x", peer("shore"))], 0, T0);
            s.crash_after(crash_at);
            let _ = s.deferred(&id, &["b@x"], "421", T0);
        }
        let s = check_consistent(dir.path());
        let (state, f) = s.load(&id).unwrap();
        assert!(
            (state == QueueState::Queued && f.envelope.recipients[0].state == RcptState::Pending)
                || state == QueueState::Dead,
            "step {crash_at}: {state:?} {f:?}"
        );
        if state == QueueState::Dead {
            s.crash_after(crash_at);
            let _ = s.release(&id);
            drop(s);
            let s = check_consistent(dir.path());
            let (state, f) = s.load(&id).unwrap();
            assert!(
                state == QueueState::Queued || f.envelope.dead_reason.is_some(),
                "step {crash_at}"
            );
        }
    }
}

#[test]
fn crash_while_bouncing_sends_the_dsn_at_least_once() {
    for crash_at in 1..=20 {
        let dir = tempfile::tempdir().unwrap();
        let id;
        {
            let s = open(dir.path());
            id = enqueue(&s, "x", &[("b@x", peer("shore"))], 0, T0);
            s.failed(&id, &["b@x"], "5.1.1", "550 no", T0).unwrap();
            s.crash_after(crash_at);
            let _ = s.bounce(&id, Target::Lan, T0);
        }
        let s = check_consistent(dir.path());
        let entries: Vec<Arc<Envelope>> = s
            .entries()
            .unwrap()
            .map(|e| e.unwrap().envelope.unwrap())
            .collect();
        let original = entries.iter().any(|e| e.id == id);
        let dsns = entries.iter().filter(|e| e.sender.is_empty()).count();
        assert!(
            original || dsns == 1,
            "step {crash_at}: neither the original nor its DSN survived"
        );
        assert!(dsns <= 1);
        if original {
            assert_eq!(s.pending_bounces().unwrap().len(), 1);
        }
    }
}

/// Enqueue rate with fsync on, in a temporary directory on this disk:
/// `cargo test -p skywave-spool --release -- --ignored --nocapture fsync_cost`.
#[test]
#[ignore = "measurement, prints a figure"]
fn fsync_cost() {
    let dir = tempfile::tempdir_in(std::env::temp_dir()).unwrap();
    let s = open(dir.path());
    let body = vec![b'x'; 2000];
    let n = 300;
    let start = std::time::Instant::now();
    for _ in 0..n {
        s.enqueue(
            &NewMessage {
                sender: "a@b".into(),
                recipients: vec![("c@d".into(), Target::Lan)],
                priority: Priority::NORMAL,
                message: &body,
                dsn: Default::default(),
                rcpt_dsn: Vec::new(),
                origin: None,
            },
            T0,
        )
        .unwrap();
    }
    let secs = start.elapsed().as_secs_f64();
    println!(
        "enqueue with fsync, 2 kB messages, one thread, in {}: {n} in {secs:.2} s = {:.0} msg/s ({:.2} ms each)",
        dir.path().display(),
        n as f64 / secs,
        1000.0 * secs / n as f64
    );
    // Several SMTP sessions at once: their fsyncs overlap.
    let s = Arc::new(s);
    let threads = 4;
    let start = std::time::Instant::now();
    let handles: Vec<_> = (0..threads)
        .map(|_| {
            let (s, body) = (s.clone(), body.clone());
            std::thread::spawn(move || {
                for _ in 0..n / threads {
                    s.enqueue(
                        &NewMessage {
                            sender: "a@b".into(),
                            recipients: vec![("c@d".into(), Target::Lan)],
                            priority: Priority::NORMAL,
                            message: &body,
                            dsn: Default::default(),
                            rcpt_dsn: Vec::new(),
                            origin: None,
                        },
                        T0,
                    )
                    .unwrap();
                }
            })
        })
        .collect();
    handles.into_iter().for_each(|h| h.join().unwrap());
    let secs = start.elapsed().as_secs_f64();
    println!(
        "enqueue with fsync, 2 kB messages, {threads} threads: {n} in {secs:.2} s = {:.0} msg/s",
        n as f64 / secs
    );
}

#[test]
fn enqueue_with_header_puts_the_chosen_id_in_front_of_the_message() {
    let dir = tempfile::tempdir().unwrap();
    let s = open(dir.path());
    let body = msg("h");
    let id = s
        .enqueue_with_header(
            &NewMessage {
                sender: "alice@ship.example".into(),
                recipients: vec![("bob@shore.example".into(), peer("shore"))],
                priority: Priority::NORMAL,
                message: &body,
                dsn: Default::default(),
                rcpt_dsn: Vec::new(),
                origin: None,
            },
            T0,
            |id| format!("X-Queue: {id}\r\n"),
        )
        .unwrap();
    let (_, file) = s.load(&id).unwrap();
    let mut expected = format!("X-Queue: {id}\r\n").into_bytes();
    expected.extend_from_slice(&body);
    assert_eq!(file.message, expected);
    assert_eq!(file.envelope.size, expected.len() as u64);
}

#[test]
fn an_operator_nudge_is_seen_by_the_owner_and_differs_each_time() {
    let dir = tempfile::tempdir().unwrap();
    let owner = open(dir.path());
    let admin = Spool::open_admin(dir.path(), SpoolConfig::default()).unwrap();
    assert_eq!(owner.nudged(), None);
    admin.nudge();
    let first = owner.nudged();
    assert!(first.is_some());
    std::thread::sleep(std::time::Duration::from_millis(2));
    admin.nudge();
    let second = owner.nudged();
    assert!(second.is_some() && second != first, "{first:?} {second:?}");
}

/// The "disk" of the reserve test: bytes free, or `u64::MAX` for a file system that cannot be
/// measured. One test uses it, so no other test races it.
static TEST_DISK: AtomicU64 = AtomicU64::new(0);

fn test_disk(_: &Path) -> io::Result<Space> {
    match TEST_DISK.load(Ordering::SeqCst) {
        u64::MAX => Err(io::Error::other("statvfs not supported here")),
        bytes => Ok(Space { bytes, files: None }),
    }
}

#[test]
fn new_mail_is_admitted_only_while_it_leaves_the_reserve() {
    let dir = tempfile::tempdir().unwrap();
    let s = open_with(
        dir.path(),
        SpoolConfig {
            min_free_space: 1_000_000,
            free_space: test_disk,
            ..SpoolConfig::default()
        },
    );
    TEST_DISK.store(1_500_000, Ordering::SeqCst);
    assert_eq!(s.admit(500_000), Ok(()));
    let short = s.admit(500_001).unwrap_err();
    assert_eq!(short.space.bytes, 1_500_000);
    assert_eq!(short.reserve, 1_000_000);
    // The disk fills: nothing comes in, but queued mail still changes state (a status rewrite
    // is not new mail).
    let id = enqueue(&s, "before", &[("bob@shore.example", peer("shore"))], 0, T0);
    TEST_DISK.store(999_999, Ordering::SeqCst);
    assert!(s.admit(0).is_err());
    assert_eq!(s.room().unwrap().space.bytes, 999_999);
    s.mark_in_flight(&id, &["bob@shore.example"], T0).unwrap();
    s.delivered(&id, &["bob@shore.example"], Handoff::Passed, T0)
        .unwrap();
    // Space freed: mail comes in again.
    TEST_DISK.store(2_000_000, Ordering::SeqCst);
    assert_eq!(s.admit(1_000_000), Ok(()));
    // A file system that cannot be measured takes the mail rather than stop the gateway.
    TEST_DISK.store(u64::MAX, Ordering::SeqCst);
    assert!(s.room().is_err());
    assert_eq!(s.admit(u64::MAX), Ok(()));
}

#[test]
fn the_real_file_system_is_measured_by_default() {
    let dir = tempfile::tempdir().unwrap();
    let s = open(dir.path());
    let room = s.room().unwrap();
    assert_eq!(room.reserve, DEFAULT_MIN_FREE_SPACE);
    assert!(room.space.bytes > 0);
    // No disk has an exabyte to spare beyond the reserve.
    assert!(s.admit(1 << 60).is_err());
}

#[test]
fn giving_up_fails_only_the_waiting_recipients_of_the_target_asked_for() {
    let dir = tempfile::tempdir().unwrap();
    let s = open(dir.path());
    let shore = peer("shore");
    let id = enqueue(
        &s,
        "mixed",
        &[
            ("a@shore", shore.clone()),
            ("b@shore", shore.clone()),
            ("c@ship", Target::Lan),
        ],
        0,
        T0,
    );
    s.mark_in_flight(&id, &["b@shore"], T0).unwrap();
    let (failed, in_flight, d) = s
        .fail_waiting(&id, Some(&shore), "5.0.0", "given up", T0 + 1)
        .unwrap();
    assert_eq!((failed, in_flight, d), (1, 1, Disposition::Queued));
    let env = s.load(&id).unwrap().1.envelope;
    let states: Vec<&str> = env.recipients.iter().map(|r| r.state.name()).collect();
    assert_eq!(states, ["failed", "in-flight", "pending"]);
    // Again: nothing waits for the shore now, and nothing changes.
    assert_eq!(
        s.fail_waiting(&id, Some(&shore), "5.0.0", "given up", T0 + 2)
            .unwrap(),
        (0, 1, Disposition::Queued)
    );
    // The in-flight one delivered, the LAN one given up: the message needs its DSN.
    s.delivered(&id, &["b@shore"], Handoff::Passed, T0 + 3)
        .unwrap();
    assert_eq!(
        s.fail_waiting(&id, None, "5.0.0", "given up", T0 + 4)
            .unwrap(),
        (1, 0, Disposition::NeedsBounce)
    );
    // A dead letter is refused.
    let dead = enqueue(&s, "dead", &[("a@shore", shore.clone())], 0, T0);
    let (state, mut file) = s.load(&dead).unwrap();
    assert_eq!(state, QueueState::Queued);
    file.envelope.dead_reason = Some("test".into());
    fs::write(
        s.root().join("queue").join(dead.as_str()),
        encode(&file).unwrap(),
    )
    .unwrap();
    fs::rename(
        s.root().join("queue").join(dead.as_str()),
        s.root().join("dead").join(dead.as_str()),
    )
    .unwrap();
    assert!(matches!(
        s.fail_waiting(&dead, None, "5.0.0", "given up", T0),
        Err(Error::WrongState { .. })
    ));
}

/// The DSNs [`Spool::warn_delayed`] queues at `now` towards the LAN: (message, warning text).
fn warn_to_lan(s: &Spool, now: u64) -> Vec<(QueueId, String)> {
    s.warn_delayed(now, |_| Target::Lan)
        .unwrap()
        .into_iter()
        .map(|(id, dsn, target)| {
            assert_eq!(target, Target::Lan);
            let text = String::from_utf8(s.load(&dsn).unwrap().1.message).unwrap();
            (id, text)
        })
        .collect()
}

#[test]
fn a_sender_is_told_once_that_mail_still_waits_after_the_delay_warning_time() {
    let dir = tempfile::tempdir().unwrap();
    let s = open(dir.path());
    let shore = peer("shore");
    let after = DEFAULT_DELAY_WARNING;
    // One recipient tried and refused for now, one never tried, one delivered.
    let tried = enqueue(
        &s,
        "tried",
        &[
            ("b@x", shore.clone()),
            ("c@x", shore.clone()),
            ("d@lan", Target::Lan),
        ],
        0,
        T0,
    );
    s.mark_in_flight(&tried, &["b@x"], T0 + 60).unwrap();
    s.deferred(&tried, &["b@x"], "421 4.3.2 shore is busy", T0 + 60)
        .unwrap();
    s.mark_in_flight(&tried, &["d@lan"], T0 + 60).unwrap();
    s.delivered(&tried, &["d@lan"], Handoff::Passed, T0 + 60)
        .unwrap();
    // Held by the operator: its sender hears of it too.
    let held = enqueue(&s, "held", &[("e@x", shore.clone())], 0, T0);
    s.hold(&held).unwrap();
    // On its way (a multicast to a ship in EMCON, whose acknowledgement comes when EMCON
    // ends): it was sent, not "not yet tried".
    let sent = enqueue(&s, "sent", &[("s@x", peer("fleet"))], 0, T0);
    s.mark_in_flight(&sent, &["s@x"], T0 + 30).unwrap();
    // Newer, delivered, or a bounce: nothing.
    let newer = enqueue(&s, "newer", &[("f@x", shore.clone())], 0, T0 + 600);
    let done = enqueue(&s, "done", &[("g@lan", Target::Lan)], 0, T0);
    s.mark_in_flight(&done, &["g@lan"], T0 + 1).unwrap();
    s.delivered(&done, &["g@lan"], Handoff::Passed, T0 + 1)
        .unwrap();
    let body = msg("bounce");
    s.enqueue(
        &NewMessage {
            sender: String::new(),
            recipients: vec![("h@x".into(), shore.clone())],
            priority: Priority::NORMAL,
            message: &body,
            dsn: Default::default(),
            rcpt_dsn: Vec::new(),
            origin: None,
        },
        T0,
    )
    .unwrap();

    assert!(warn_to_lan(&s, T0 + after - 1).is_empty());
    let mut warned = warn_to_lan(&s, T0 + after);
    warned.sort();
    let mut expected = vec![tried.clone(), held.clone(), sent.clone()];
    expected.sort();
    assert_eq!(
        warned.iter().map(|(id, _)| id.clone()).collect::<Vec<_>>(),
        expected
    );
    let text = &warned.iter().find(|(id, _)| *id == tried).unwrap().1;
    assert!(text.contains("To: <alice@ship.example>\r\n"), "{text}");
    assert!(text.contains("Subject: Delayed Mail (still being retried)\r\n"));
    assert!(text.contains(
        "Final-Recipient: rfc822; b@x\r\nAction: delayed\r\nStatus: 4.3.2\r\n\
         Diagnostic-Code: smtp; 421 4.3.2 shore is busy\r\n"
    ));
    assert!(text.contains(
        "Final-Recipient: rfc822; c@x\r\nAction: delayed\r\nStatus: 4.4.0\r\n\
         Diagnostic-Code: x-skywave; not yet tried: waiting for the radio link to shore\r\n"
    ));
    assert!(
        !text.contains("d@lan"),
        "a delivered recipient is not delayed"
    );
    assert!(text.contains(&format!(
        "Will-Retry-Until: {}\r\n",
        crate::dsn::rfc5322_date(T0 + 5 * 86_400)
    )));
    assert!(
        text.contains("\r\nSubject: tried\r\n"),
        "the original's headers"
    );
    let text = &warned.iter().find(|(id, _)| *id == sent).unwrap().1;
    assert!(
        text.contains("Diagnostic-Code: x-skywave; sent; fleet has not yet confirmed it\r\n"),
        "{text}"
    );
    // The newer one in its turn; each once: not again later, nor after a restart, and the
    // messages still go.
    let warned = |s: &Spool, now| {
        warn_to_lan(s, now)
            .into_iter()
            .map(|(id, _)| id)
            .collect::<Vec<_>>()
    };
    assert_eq!(warned(&s, T0 + 600 + after), vec![newer]);
    assert!(warned(&s, T0 + 2 * after).is_empty());
    drop(s);
    let s = open(dir.path());
    assert!(warned(&s, T0 + 3 * after).is_empty());
    assert_eq!(
        s.load(&tried).unwrap().1.envelope.delay_warned,
        Some(T0 + after)
    );
    assert!(ids(&s.due(&shore, T0 + 3 * after, u64::MAX).unwrap()).contains(&tried));
}

#[test]
fn no_delay_warning_when_turned_off_or_past_the_expiry() {
    let dir = tempfile::tempdir().unwrap();
    let off = open_with(
        dir.path(),
        SpoolConfig {
            delay_warning: None,
            ..SpoolConfig::default()
        },
    );
    enqueue(&off, "a", &[("b@x", peer("shore"))], 0, T0);
    assert!(warn_to_lan(&off, T0 + 86_400).is_empty());
    drop(off);
    // Expired: the sweep fails it instead, with a DSN of its own.
    let s = open(dir.path());
    assert!(warn_to_lan(&s, T0 + 5 * 86_400).is_empty());
    assert_eq!(warn_to_lan(&s, T0 + 5 * 86_400 - 1).len(), 1);
}

/// Queues a message whose sender asked, per recipient, what `notify` says (`None`: nothing),
/// with `ENVID=E1`.
fn enqueue_notify(s: &Spool, rcpts: &[(&str, Target, Option<Notify>)]) -> QueueId {
    let body = msg("dsn");
    s.enqueue(
        &NewMessage {
            sender: "alice@ship.example".into(),
            recipients: rcpts
                .iter()
                .map(|(a, t, _)| (a.to_string(), t.clone()))
                .collect(),
            priority: Priority::NORMAL,
            message: &body,
            dsn: MailDsn {
                ret: None,
                envid: Some("E1".into()),
            },
            rcpt_dsn: rcpts
                .iter()
                .filter_map(|(a, _, n)| {
                    n.map(|n| {
                        (
                            a.to_string(),
                            RcptDsn {
                                notify: Some(n),
                                orcpt: Some(a.to_uppercase()),
                            },
                        )
                    })
                })
                .collect(),
            origin: None,
        },
        T0,
    )
    .unwrap()
}

const SUCCESS: Notify = Notify {
    success: true,
    failure: false,
    delay: false,
};

#[test]
fn notify_never_silences_a_failure_and_the_message_just_leaves() {
    let dir = tempfile::tempdir().unwrap();
    let s = open(dir.path());
    let id = enqueue_notify(
        &s,
        &[("bob@shore.example", peer("shore"), Some(Notify::NEVER))],
    );
    let (_, file) = s.load(&id).unwrap();
    assert_eq!(file.envelope.dsn.envid.as_deref(), Some("E1"));
    assert_eq!(file.envelope.recipients[0].dsn.notify, Some(Notify::NEVER));
    let d = s
        .failed(&id, &["bob@shore.example"], "5.1.1", "550 no", T0 + 1)
        .unwrap();
    assert_eq!(d, Disposition::Done);
    assert!(matches!(s.load(&id), Err(Error::NotFound(_))));
    assert_eq!(s.entries().unwrap().count(), 0);
}

#[test]
fn success_is_reported_as_asked_and_only_when_it_is_this_gateways_to_report() {
    let dir = tempfile::tempdir().unwrap();
    let s = open(dir.path());
    let lan = Target::Lan;
    let id = enqueue_notify(
        &s,
        &[
            ("final@lan.example", lan.clone(), Some(SUCCESS)),
            ("relayed@shore.example", peer("shore"), Some(SUCCESS)),
            ("passed@shore.example", peer("other"), Some(SUCCESS)),
            ("quiet@shore.example", peer("shore"), None),
            ("failed@shore.example", peer("third"), Some(Notify::NEVER)),
        ],
    );
    s.delivered(&id, &["final@lan.example"], Handoff::Final, T0 + 1)
        .unwrap();
    s.delivered(
        &id,
        &["relayed@shore.example", "quiet@shore.example"],
        Handoff::Relayed,
        T0 + 2,
    )
    .unwrap();
    s.delivered(&id, &["passed@shore.example"], Handoff::Passed, T0 + 3)
        .unwrap();
    let d = s
        .failed(&id, &["failed@shore.example"], "5.1.1", "550 no", T0 + 4)
        .unwrap();
    assert_eq!(d, Disposition::NeedsBounce);
    // The report survives a restart before it is sent.
    drop(s);
    let s = open(dir.path());
    assert_eq!(s.pending_bounces().unwrap().len(), 1);
    let (_, text) = bounce_to_lan(&s, &id, T0 + 5);
    assert!(
        text.contains("Subject: Successful Mail Delivery Report\r\n"),
        "{text}"
    );
    assert!(text.contains("Original-Envelope-Id: E1\r\n"), "{text}");
    assert!(
        text.contains(
            "Original-Recipient: rfc822; FINAL@LAN.EXAMPLE\r\n\
             Final-Recipient: rfc822; final@lan.example\r\nAction: delivered\r\nStatus: 2.0.0\r\n"
        ),
        "{text}"
    );
    assert!(
        text.contains("Final-Recipient: rfc822; relayed@shore.example\r\nAction: relayed\r\n"),
        "{text}"
    );
    for absent in ["passed@", "quiet@", "failed@", "Action: failed"] {
        assert!(!text.contains(absent), "{absent} in {text}");
    }
    assert!(matches!(s.load(&id), Err(Error::NotFound(_))));
}

#[test]
fn a_delay_warning_leaves_out_recipients_whose_sender_refused_it() {
    let dir = tempfile::tempdir().unwrap();
    let s = open(dir.path());
    let failure_only = Notify {
        failure: true,
        ..Notify::NEVER
    };
    let id = enqueue_notify(
        &s,
        &[("bob@shore.example", peer("shore"), Some(failure_only))],
    );
    let later = T0 + 5 * 3600;
    assert!(s.warn_delayed(later, |_| Target::Lan).unwrap().is_empty());
    let both = enqueue_notify(
        &s,
        &[
            ("bob@shore.example", peer("shore"), Some(failure_only)),
            ("carol@shore.example", peer("shore"), None),
        ],
    );
    let warned = s.warn_delayed(later, |_| Target::Lan).unwrap();
    assert_eq!(warned.len(), 1);
    assert_eq!(warned[0].0, both);
    let text = String::from_utf8(s.load(&warned[0].1).unwrap().1.message).unwrap();
    assert!(text.contains("carol@shore.example"), "{text}");
    assert!(!text.contains("bob@shore.example"), "{text}");
    // The first still waits, unwarned, and its failure is still reported.
    assert_eq!(s.load(&id).unwrap().1.envelope.delay_warned, None);
}

#[test]
fn ret_full_returns_the_whole_of_a_failed_message_up_to_the_limit() {
    let dir = tempfile::tempdir().unwrap();
    let s = open_with(
        dir.path(),
        SpoolConfig {
            reporting_mta: "ship.example".into(),
            return_full_limit: 2000,
            ..SpoolConfig::default()
        },
    );
    let failed = |body: &[u8], ret: Option<Ret>| {
        let id = s
            .enqueue(
                &NewMessage {
                    sender: "alice@ship.example".into(),
                    recipients: vec![("bob@shore.example".into(), peer("shore"))],
                    priority: Priority::NORMAL,
                    message: body,
                    dsn: MailDsn { ret, envid: None },
                    rcpt_dsn: Vec::new(),
                    origin: None,
                },
                T0,
            )
            .unwrap();
        let d = s
            .failed(&id, &["bob@shore.example"], "5.1.1", "550 no", T0 + 1)
            .unwrap();
        assert_eq!(d, Disposition::NeedsBounce);
        bounce_to_lan(&s, &id, T0 + 2).1
    };
    let small = b"Subject: small\r\n\r\nthe body comes back\r\n";
    let whole = failed(small, Some(Ret::Full));
    assert!(
        whole.contains("Content-Type: message/rfc822\r\n"),
        "{whole}"
    );
    assert!(
        whole.contains("\r\nSubject: small\r\n\r\nthe body comes back\r\n"),
        "{whole}"
    );
    // Without RET, or with RET=HDRS, the header only.
    for ret in [None, Some(Ret::Hdrs)] {
        let text = failed(small, ret);
        assert!(
            text.contains("Content-Type: text/rfc822-headers\r\n"),
            "{text}"
        );
        assert!(!text.contains("the body comes back"), "{text}");
    }
    // Over the limit: the header only, and the report says why.
    let mut big = b"Subject: big\r\n\r\n".to_vec();
    big.extend(std::iter::repeat_n(b'x', 3000));
    big.extend_from_slice(b"\r\n");
    let text = failed(&big, Some(Ret::Full));
    assert!(
        text.contains("Content-Type: text/rfc822-headers\r\n"),
        "{text}"
    );
    assert!(
        text.contains("(RET=FULL). It is larger than the\r\n2000 bytes"),
        "{text}"
    );
    assert!(!text.contains("xxxx"), "{text}");
}

#[test]
fn a_delivery_asked_for_goes_with_the_delay_warning_and_is_not_told_twice() {
    let dir = tempfile::tempdir().unwrap();
    let s = open(dir.path());
    let id = enqueue_notify(
        &s,
        &[
            ("captain@ship.example", Target::Lan, Some(SUCCESS)),
            ("ops@shore.example", peer("shore"), None),
        ],
    );
    s.delivered(&id, &["captain@ship.example"], Handoff::Final, T0 + 1)
        .unwrap();
    let warned = warn_to_lan(&s, T0 + 5 * 3600);
    assert_eq!(warned.len(), 1);
    let text = &warned[0].1;
    assert!(
        text.contains("Subject: Delayed Mail (still being retried)"),
        "{text}"
    );
    assert!(
        text.contains("Final-Recipient: rfc822; ops@shore.example\r\nAction: delayed\r\n"),
        "{text}"
    );
    assert!(
        text.contains(
            "Final-Recipient: rfc822; captain@ship.example\r\nAction: delivered\r\nStatus: 2.0.0\r\n"
        ),
        "{text}"
    );
    assert!(
        text.contains("you are told that it went on to these:\r\n\r\n<captain@ship.example>: delivered to the mailbox\r\n"),
        "{text}"
    );
    // The shore's copy goes at last: nothing is left to tell, and the message just leaves.
    let d = s
        .delivered(&id, &["ops@shore.example"], Handoff::Passed, T0 + 6 * 3600)
        .unwrap();
    assert_eq!(d, Disposition::Done);
    assert!(matches!(s.load(&id), Err(Error::NotFound(_))));
}

#[test]
fn fall_back_moves_only_what_waited_long_enough_and_is_free_to_go() {
    let dir = tempfile::tempdir().unwrap();
    let s = open(dir.path());
    let (sat, hf) = (peer("shore-sat"), peer("shore-hf"));
    // Old, two recipients for the satellite peer (one tried and deferred) and one for the LAN.
    let old = enqueue(
        &s,
        "old",
        &[
            ("a@shore.example", sat.clone()),
            ("b@shore.example", sat.clone()),
            ("c@ship.example", Target::Lan),
        ],
        0,
        T0,
    );
    s.mark_in_flight(&old, &["b@shore.example"], T0 + 10)
        .unwrap();
    s.deferred(&old, &["b@shore.example"], "connection refused", T0 + 10)
        .unwrap();
    // Old but in flight: its outcome decides.
    let flying = enqueue(&s, "flying", &[("d@shore.example", sat.clone())], 0, T0);
    s.mark_in_flight(&flying, &["d@shore.example"], T0 + 20)
        .unwrap();
    // Old but held by the operator.
    let held = enqueue(&s, "held", &[("e@shore.example", sat.clone())], 0, T0);
    s.hold(&held).unwrap();
    // Too young.
    let young = enqueue(
        &s,
        "young",
        &[("f@shore.example", sat.clone())],
        0,
        T0 + 1000,
    );

    let moved = s.fall_back(&sat, &hf, &by_age(T0 + 600, u64::MAX)).unwrap();
    assert_eq!(
        moved,
        [(
            old.clone(),
            vec!["a@shore.example".to_owned(), "b@shore.example".to_owned()]
        )]
    );
    let stays = |s: &Spool, id: &QueueId| {
        s.load(id)
            .unwrap()
            .1
            .envelope
            .recipients
            .iter()
            .all(|r| r.target == sat)
    };
    assert!(stays(&s, &flying));
    // Durable, and each starts afresh for the fallback: due at once, no attempt counted.
    drop(s);
    let s = open(dir.path());
    let env = s.load(&old).unwrap().1.envelope;
    for r in &env.recipients[..2] {
        assert_eq!(r.target, hf);
        assert_eq!(
            (r.state.clone(), r.attempts, r.next_attempt),
            (RcptState::Pending, 0, 0)
        );
    }
    assert_eq!(
        env.recipients[1].last_error.as_deref(),
        Some("connection refused")
    );
    assert_eq!(env.recipients[2].target, Target::Lan);
    assert_eq!(
        ids(&s.due(&hf, T0 + 600, u64::MAX).unwrap()),
        std::slice::from_ref(&old)
    );
    assert!(ids(&s.due(&sat, T0 + 2000, u64::MAX).unwrap()).contains(&young));
    // The others stayed where they were.
    for id in [&flying, &held, &young] {
        assert!(stays(&s, id));
    }
    // The restart made the one in flight waiting again: now it goes; nothing is moved twice.
    assert_eq!(
        s.fall_back(&sat, &hf, &by_age(T0 + 600, u64::MAX)).unwrap(),
        [(flying, vec!["d@shore.example".to_owned()])]
    );
    // Nothing over the size allowed, nothing from a held peer.
    assert!(
        s.fall_back(&sat, &hf, &by_age(T0 + 5000, 10))
            .unwrap()
            .is_empty()
    );
    s.hold_target(&sat).unwrap();
    assert!(
        s.fall_back(&sat, &hf, &by_age(T0 + 5000, u64::MAX))
            .unwrap()
            .is_empty()
    );
    s.release_target(&sat).unwrap();
    assert_eq!(
        s.fall_back(&sat, &hf, &by_age(T0 + 5000, u64::MAX))
            .unwrap(),
        [(young, vec!["f@shore.example".to_owned()])]
    );
}

/// A fallback whose links send a message smaller than it came (images scaled down, say) takes
/// one over its size as it came when it weighs within it as sent, and only then.
#[test]
fn a_weighed_fall_back_takes_what_goes_small_enough() {
    let dir = tempfile::tempdir().unwrap();
    let s = open(dir.path());
    let (sat, hf) = (peer("shore-sat"), peer("shore-hf"));
    let big = enqueue(&s, "big", &[("a@shore.example", sat.clone())], 0, T0);
    let size = s.load(&big).unwrap().1.message.len() as u64;
    let rule = by_age(T0 + 600, size - 1);
    // As it came, it is over the limit; weighed as sent, it stays over: it stays.
    assert!(s.fall_back(&sat, &hf, &rule).unwrap().is_empty());
    let weighed = std::cell::Cell::new(0);
    let as_came = |m: &[u8]| {
        weighed.set(weighed.get() + 1);
        m.len() as u64
    };
    assert!(
        s.fall_back_weighed(&sat, &hf, &rule, &as_came)
            .unwrap()
            .is_empty()
    );
    assert_eq!(weighed.get(), 1);
    // Sent at half its size, it fits and goes.
    let halved = |m: &[u8]| m.len() as u64 / 2;
    assert_eq!(
        s.fall_back_weighed(&sat, &hf, &rule, &halved).unwrap(),
        [(big.clone(), vec!["a@shore.example".to_owned()])]
    );
    // A message within the limit as it came is not weighed at all.
    let small = enqueue(&s, "small", &[("b@shore.example", sat.clone())], 0, T0);
    let never = |_: &[u8]| -> u64 { panic!("weighed a message that fits as it came") };
    assert_eq!(
        s.fall_back_weighed(&sat, &hf, &by_age(T0 + 600, u64::MAX), &never)
            .unwrap(),
        [(small, vec!["b@shore.example".to_owned()])]
    );
}

/// The age rule alone: what has waited since `waited_since`, up to `max_size` bytes.
fn by_age(waited_since: u64, max_size: u64) -> FallBack {
    FallBack {
        waited_since,
        tried: false,
        back: false,
        max_size,
        now: waited_since,
    }
}

/// A peer that has not answered: what it was tried for moves, whatever its age, and may come
/// back; when the peer answers again, it comes back if it still waits, and its next wait for
/// the fallback counts from its return.
#[test]
fn mail_tried_for_a_silent_peer_falls_back_and_comes_back_when_it_answers() {
    let dir = tempfile::tempdir().unwrap();
    let s = open(dir.path());
    let sat = Target::Peer("sat".into());
    let hf = Target::Peer("hf".into());
    let tried = enqueue(
        &s,
        "tried",
        &[("a@shore.example", sat.clone())],
        0,
        T0 + 500,
    );
    s.mark_in_flight(&tried, &["a@shore.example"], T0 + 500)
        .unwrap();
    s.deferred(&tried, &["a@shore.example"], "no answer", T0 + 510)
        .unwrap();
    let untried = enqueue(
        &s,
        "untried",
        &[("b@shore.example", sat.clone())],
        0,
        T0 + 520,
    );
    let silent = FallBack {
        waited_since: T0,
        tried: true,
        back: true,
        max_size: u64::MAX,
        now: T0 + 530,
    };
    assert_eq!(
        s.fall_back(&sat, &hf, &silent).unwrap(),
        [(tried.clone(), vec!["a@shore.example".to_owned()])]
    );
    let rcpt = |s: &Spool, id: &QueueId| s.load(id).unwrap().1.envelope.recipients[0].clone();
    assert_eq!(
        rcpt(&s, &tried).moved,
        Some(Moved::FellBack {
            from: "sat".into(),
            at: T0 + 530,
            back: true
        })
    );
    assert_eq!(rcpt(&s, &untried).target, sat);
    // What a probe of the silent peer would bring back: the move at T0 + 530; nothing of
    // another peer's, nothing while an operator holds either peer.
    assert_eq!(s.awaiting_return("sat").unwrap(), Some(T0 + 530));
    assert_eq!(s.awaiting_return("hf").unwrap(), None);
    for held in [&sat, &hf] {
        s.hold_target(held).unwrap();
        assert_eq!(s.awaiting_return("sat").unwrap(), None);
        s.release_target(held).unwrap();
    }
    // Nor while the recipient is in the middle of an attempt at the fallback.
    s.mark_in_flight(&tried, &["a@shore.example"], T0 + 540)
        .unwrap();
    assert_eq!(s.awaiting_return("sat").unwrap(), None);
    s.deferred(&tried, &["a@shore.example"], "window closed", T0 + 550)
        .unwrap();
    assert_eq!(s.awaiting_return("sat").unwrap(), Some(T0 + 530));
    // Nothing comes back to another peer, nor while the fallback is held.
    assert!(
        s.fall_back_return(&hf, "elsewhere", T0 + 600, u64::MAX, T0 + 600)
            .unwrap()
            .is_empty()
    );
    s.hold_target(&hf).unwrap();
    assert!(
        s.fall_back_return(&hf, "sat", T0 + 600, u64::MAX, T0 + 600)
            .unwrap()
            .is_empty()
    );
    s.release_target(&hf).unwrap();
    // Nor into a peer the operator holds, nor when the peer's answer came before the move
    // (what a restart remembers of it).
    s.hold_target(&sat).unwrap();
    assert!(
        s.fall_back_return(&hf, "sat", T0 + 600, u64::MAX, T0 + 600)
            .unwrap()
            .is_empty()
    );
    s.release_target(&sat).unwrap();
    assert!(
        s.fall_back_return(&hf, "sat", T0 + 529, u64::MAX, T0 + 600)
            .unwrap()
            .is_empty()
    );
    assert_eq!(
        s.fall_back_return(&hf, "sat", T0 + 600, u64::MAX, T0 + 600)
            .unwrap(),
        [(tried.clone(), vec!["a@shore.example".to_owned()])]
    );
    assert_eq!(s.awaiting_return("sat").unwrap(), None);
    let back = rcpt(&s, &tried);
    assert_eq!(
        (back.target, back.state, back.attempts, back.moved),
        (
            sat.clone(),
            RcptState::Pending,
            0,
            Some(Moved::Returned { at: T0 + 600 })
        )
    );
    // Its wait counts from the return: it arrived at T0 + 500, but has waited only since
    // T0 + 600.
    let moved_ids =
        |m: Vec<(QueueId, Vec<String>)>| m.into_iter().map(|(id, _)| id).collect::<Vec<_>>();
    assert_eq!(
        moved_ids(s.fall_back(&sat, &hf, &by_age(T0 + 599, u64::MAX)).unwrap()),
        [untried]
    );
    assert_eq!(
        moved_ids(s.fall_back(&sat, &hf, &by_age(T0 + 600, u64::MAX)).unwrap()),
        std::slice::from_ref(&tried)
    );
    // Moved by age from a peer that answers: it does not come back, and no probe is for it.
    assert_eq!(
        rcpt(&s, &tried).moved,
        Some(Moved::FellBack {
            from: "sat".into(),
            at: T0 + 600,
            back: false
        })
    );
    assert_eq!(s.awaiting_return("sat").unwrap(), None);
    assert!(
        s.fall_back_return(&hf, "sat", T0 + 700, u64::MAX, T0 + 700)
            .unwrap()
            .is_empty()
    );
}

/// The journal tells a message's life as an operator asks about it: where each recipient
/// went, each attempt and why it failed, the report to the sender and the report's own life.
#[test]
fn the_journal_tells_each_messages_life() {
    use crate::journal::{What, matching, read};
    let dir = tempfile::tempdir().unwrap();
    let s = open(dir.path());
    let body = b"Message-ID: <7@ship.example>\r\nSubject: x\r\n\r\nhi\r\n";
    let id = s
        .enqueue(
            &NewMessage {
                sender: "alice@ship.example".into(),
                recipients: vec![
                    ("ops@shore.example".into(), peer("shore")),
                    ("nobody@shore.example".into(), peer("shore")),
                ],
                priority: Priority::NORMAL,
                message: body,
                dsn: Default::default(),
                rcpt_dsn: Vec::new(),
                origin: None,
            },
            T0,
        )
        .unwrap();
    let both = ["ops@shore.example", "nobody@shore.example"];
    s.mark_in_flight(&id, &both, T0 + 1).unwrap();
    s.deferred(&id, &both, "no answer from shore", T0 + 60)
        .unwrap();
    s.mark_in_flight(&id, &both, T0 + 120).unwrap();
    s.delivered(&id, &["ops@shore.example"], Handoff::Relayed, T0 + 130)
        .unwrap();
    let d = s
        .failed(
            &id,
            &["nobody@shore.example"],
            "5.1.1",
            "550 no such user",
            T0 + 130,
        )
        .unwrap();
    assert_eq!(d, Disposition::NeedsBounce);
    let report = s.bounce(&id, Target::Lan, T0 + 131).unwrap().unwrap().dsn;
    s.hold(&report).unwrap();
    s.delete(&report).unwrap();

    let events = read(dir.path()).unwrap();
    let life: Vec<_> = events
        .iter()
        .filter(|e| e.id == id.as_str())
        .map(|e| {
            (
                e.t,
                e.what,
                e.rcpts.len(),
                e.via.as_deref(),
                e.text.as_deref(),
            )
        })
        .collect();
    let report_text = format!("failure report to the sender queued as {report}");
    assert_eq!(
        life,
        [
            (T0, What::Queued, 2, Some("peer:shore"), None),
            (T0 + 1, What::Sent, 2, Some("peer:shore"), None),
            (
                T0 + 60,
                What::Deferred,
                2,
                Some("peer:shore"),
                Some("no answer from shore")
            ),
            (T0 + 120, What::Sent, 2, Some("peer:shore"), None),
            (T0 + 130, What::Delivered, 1, Some("peer:shore"), None),
            (
                T0 + 130,
                What::Failed,
                1,
                Some("peer:shore"),
                Some("5.1.1 550 no such user")
            ),
            (T0 + 131, What::Report, 0, None, Some(report_text.as_str())),
            (T0 + 131, What::Done, 0, None, None),
        ]
    );
    let first = &events[0];
    assert_eq!(
        (
            first.from.as_deref(),
            first.message_id.as_deref(),
            first.size
        ),
        (
            Some("alice@ship.example"),
            Some("<7@ship.example>"),
            Some(body.len() as u64)
        )
    );
    // The report's life follows: queued to the sender on the LAN, held, deleted.
    let report_life: Vec<_> = events
        .iter()
        .filter(|e| e.id == report.as_str())
        .map(|e| e.what)
        .collect();
    assert_eq!(report_life, [What::Queued, What::Held, What::Deleted]);
    // Found by the Message-ID, with its report.
    assert_eq!(
        matching(&events, "7@ship.example"),
        [id.to_string(), report.to_string()]
    );
}
