//! Relay control of the LAN listener, end to end against `skywave run`: every relay trick
//! (percent hack, source route, bang path, quoted local part with '@', trailing dot) and plain
//! relaying to the HF peer are refused with 550/554 for a client outside
//! `[lan] relay_networks`; from inside, normal addresses are routed as configured (the LAN
//! domain to the Maildir, the peer's domain queued for the peer), and unrouted domains are
//! refused. An IP literal and a bang path without '@' are refused earlier, as bad syntax (501).
//! On loopback every client is 127.0.0.1, so "outside" is a table whose relay_networks exclude
//! 127.0.0.0/8 and "inside" one that includes it.
//!
//! The exact command bytes matter here, so the client is a raw line client rather than a
//! library that would rewrite the addresses.

#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "lan_support.rs"]
mod support;

use support::{Gateway, RawClient, routes, skywave_status, wait_files};

const TRICKS: &[(&str, &str)] = &[
    ("percent hack", "<victim%evil.example@ship.test>"),
    ("percent hack to a peer", "<victim%evil.example@shore.test>"),
    ("source route", "<@ship.test:victim@evil.example>"),
    (
        "source route, two hops",
        "<@ship.test,@shore.test:victim@evil.example>",
    ),
    ("bang path", "<evil.example!victim@ship.test>"),
    (
        "quoted local part with @",
        "<\"victim@evil.example\"@ship.test>",
    ),
    ("trailing dot", "<victim@evil.example.>"),
    ("relay to the peer", "<ops@shore.test>"),
    ("unrouted domain", "<victim@evil.example>"),
];

async fn rcpt_replies(gw: &Gateway, rcpts: &[&str]) -> Vec<String> {
    let (mut c, greeting) = RawClient::connect(gw.smtp).await;
    assert!(greeting.starts_with("220 gw.ship.test"), "{greeting}");
    assert!(c.cmd("EHLO client.test").await.starts_with("250"));
    assert!(c.cmd("MAIL FROM:<a@ship.test>").await.starts_with("250"));
    let mut out = Vec::new();
    for r in rcpts {
        out.push(c.cmd(&format!("RCPT TO:{r}")).await);
    }
    assert!(c.cmd("RSET").await.starts_with("250"));
    assert!(c.cmd("QUIT").await.starts_with("221"));
    out
}

fn maildir(dir: &std::path::Path) -> String {
    format!(
        "[delivery]\nmaildir = \"{}\"\n",
        dir.join("Maildir").display()
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_trick_from_outside_is_refused_and_nothing_is_queued() {
    let tmp = tempfile::tempdir().unwrap();
    let gw = Gateway::start(tmp.path(), &routes("\"10.9.0.0/16\""), &maildir(tmp.path())).await;
    let rcpts: Vec<&str> = TRICKS.iter().map(|(_, r)| *r).collect();
    let replies = rcpt_replies(&gw, &rcpts).await;
    for ((name, rcpt), reply) in TRICKS.iter().zip(&replies) {
        assert!(
            reply.starts_with("550 ") || reply.starts_with("554 "),
            "{name} {rcpt} was not refused: {reply}"
        );
    }
    // Relaying to the peer is refused as relaying, tricks as tricks.
    assert!(replies[7].starts_with("554 5.7.1"), "{}", replies[7]);
    assert!(replies[8].starts_with("550 5.1.2"), "{}", replies[8]);
    // A bang path without any '@' and an address literal are valid RFC 5321 syntax: they reach
    // the routing table, which refuses them with its own reasons (no route / a relay trick).
    let literal = rcpt_replies(&gw, &["<evil.example!victim>", "<victim@[192.0.2.1]>"]).await;
    assert!(
        literal
            .iter()
            .all(|r| r.starts_with("550 ") || r.starts_with("554 ")),
        "{literal:?}"
    );

    // With no recipient accepted, DATA gets no 354 and nothing reaches the spool.
    let (mut c, _) = RawClient::connect(gw.smtp).await;
    c.cmd("EHLO client.test").await;
    c.cmd("MAIL FROM:<a@ship.test>").await;
    c.cmd("RCPT TO:<ops@shore.test>").await;
    let data = c.cmd("DATA").await;
    assert!(data.starts_with("554") || data.starts_with("503"), "{data}");
    c.cmd("QUIT").await;
    let (code, out, _) = skywave_status(&gw.config).await;
    assert_eq!(code, 0);
    assert!(out.contains("messages: 0 queued"), "{out}");

    // Mail for our own domain is accepted from anyone.
    let ours = rcpt_replies(&gw, &["<ops@ship.test>", "<OPS@Ship.Test>"]).await;
    assert!(ours.iter().all(|r| r.starts_with("250")), "{ours:?}");
    assert_eq!(gw.stop().await, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn from_inside_mail_is_routed_as_configured_and_tricks_still_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let gw = Gateway::start(tmp.path(), &routes("\"127.0.0.0/8\""), &maildir(tmp.path())).await;
    let replies = rcpt_replies(
        &gw,
        &["<ops@shore.test>", "<ops@ship.test>", "<x@evil.example>"],
    )
    .await;
    assert!(replies[0].starts_with("250"), "{replies:?}");
    assert!(replies[1].starts_with("250"), "{replies:?}");
    assert!(replies[2].starts_with("550 5.1.2"), "{replies:?}");
    // The tricks are refused whoever sends them: they are never a way to route.
    let tricks: Vec<&str> = TRICKS[..7].iter().map(|(_, r)| *r).collect();
    for (reply, (name, _)) in rcpt_replies(&gw, &tricks).await.iter().zip(TRICKS) {
        assert!(
            reply.starts_with("550 ") || reply.starts_with("554 "),
            "{name}: {reply}"
        );
    }

    // One message for both: the LAN copy is delivered, the peer's copy waits for its link.
    let (mut c, _) = RawClient::connect(gw.smtp).await;
    c.cmd("EHLO client.test").await;
    c.cmd("MAIL FROM:<a@ship.test>").await;
    assert!(c.cmd("RCPT TO:<ops@shore.test>").await.starts_with("250"));
    assert!(c.cmd("RCPT TO:<ops@ship.test>").await.starts_with("250"));
    assert!(c.cmd("DATA").await.starts_with("354"));
    let r = c.cmd("Subject: split\r\n\r\nto both\r\n.").await;
    assert!(r.starts_with("250 2.0.0"), "{r}");
    c.cmd("QUIT").await;
    let files = wait_files(&gw.dir.join("Maildir/new"), 1).await;
    assert_eq!(files.len(), 1, "{}", gw.log());
    let text = std::fs::read_to_string(&files[0]).unwrap();
    assert!(text.contains("Subject: split"), "{text}");
    let (_, out, _) = skywave_status(&gw.config).await;
    assert!(out.contains("  peer:shore           1\n"), "{out}");
    assert!(!out.contains("  lan "), "{out}");
    assert_eq!(gw.stop().await, 0);
}
