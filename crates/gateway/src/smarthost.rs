//! LAN delivery to the smarthost: one SMTP transaction per message, a reply for each recipient.
//!
//! Sits at the end of the receiving side of the data path, beside the Maildir: the delivery loop
//! ([`crate::delivery`]) hands it the LAN mail of a round. It speaks SMTP through lettre's
//! connection (`AsyncSmtpConnection`: the socket, STARTTLS with rustls, dot-stuffing, reply
//! parsing) and writes each transaction itself, because lettre's transport gives one result for
//! a whole transaction and sends no parameters beyond `BODY` and `SMTPUTF8`:
//! - **One reply per recipient.** Each RCPT's reply decides that recipient: a 550 for one
//!   address bounces that one while the others are delivered in the same transaction, and a 4xx
//!   defers only its own. A 452 (too many recipients) after others were taken sends those
//!   recipients again at once, in the next transaction, as RFC 5321 section 4.5.3.1.10 asks.
//! - **DSN passed on** (RFC 3461 section 6.2): to a smarthost that offers `DSN`, MAIL carries
//!   the sender's `RET` and `ENVID` and each RCPT its `NOTIFY` and `ORCPT`, so the next hop
//!   reports success (or nothing, for `NOTIFY=NEVER`) and this gateway does not
//!   ([`Handoff::Passed`]). To one that does not, this gateway reports `relayed`.
//! - **SIZE** (RFC 1870) when offered, so a smarthost refuses an oversized message before its
//!   text crosses the LAN; `BODY=8BITMIME` and `SMTPUTF8` when the message needs them. To a
//!   smarthost without `8BITMIME` an 8-bit message goes made 7-bit (quoted-printable or base64
//!   parts, [`skywave_smtp::downgrade`]; RFC 6152 section 3), or waits with the reason when it
//!   cannot be (a header field that is not UTF-8, 8-bit text under a signature). To one without
//!   `SMTPUTF8`, UTF-8 header fields go made ASCII (RFC 2047 encoded-words and the rest of RFC
//!   6857's downgrade; RFC 6531 section 3.2 forbids sending them as they are).
//! - **TLS and AUTH** as `[delivery]` says: STARTTLS (opportunistic or required) or TLS from
//!   the first byte (port 465), and a name and password (PLAIN or LOGIN) only over TLS.
//! - **One connection for a round**: the messages of a round share it, and it is closed (QUIT)
//!   at the end of the round, or dropped when it breaks.
//! - **The message byte for byte.** The queued text ends with CRLF and lettre writes CRLF "."
//!   CRLF after it, so that CRLF is left off: the smarthost gets no blank line the sender did not
//!   write.
//!
//! lettre parses the EHLO reply for its own few keywords only; the connection sends EHLO once
//! more (after STARTTLS, if any) and reads every keyword it acts on (`DSN`, `SIZE`,
//! `8BITMIME`, `SMTPUTF8`) with skywave-smtp's [`Extensions`], one reading for all.

use std::borrow::Cow;
use std::time::Duration;

use lettre::Address;
use lettre::transport::smtp::authentication::{Credentials, Mechanism};
use lettre::transport::smtp::client::{AsyncSmtpConnection, Tls, TlsParameters};
use lettre::transport::smtp::commands::{Data, Ehlo, Mail, Quit, Rcpt, Rset};
use lettre::transport::smtp::extension::{
    ClientId, MailBodyParameter, MailParameter, RcptParameter,
};
use lettre::transport::smtp::response::Response;
use skywave_smtp::{Extensions, Reply, ReplyParser};
use skywave_spool::{DueMessage, Handoff};

use crate::config::{SmarthostAuth, SmarthostTls};
use crate::outcome::Outcome;

/// What the last round of deliveries to the smarthost came to. The delivery loop keeps it in
/// `state_dir/smarthost.json` ([`ROUND_FILE`]) for `skywave status`, which runs in another
/// process: an administrator sees at once that the smarthost refuses the gateway's login, say,
/// without reading the log.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct RoundReport {
    /// The smarthost, "host:port".
    pub host: String,
    /// When the round ended (unix seconds).
    pub at: u64,
    /// Recipients delivered, deferred and failed in it.
    pub delivered: u64,
    /// See `delivered`.
    pub deferred: u64,
    /// See `delivered`.
    pub failed: u64,
    /// The connection was encrypted (STARTTLS or implicit TLS).
    pub tls: bool,
    /// What its EHLO offered that this gateway uses (`DSN`, `SIZE`, `8BITMIME`, `SMTPUTF8`);
    /// `None` when no connection was made.
    pub offers: Option<Vec<String>>,
    /// The first reason a recipient was deferred or failed in the round, if any.
    pub problem: Option<String>,
}

/// The file [`RoundReport`] is kept in, under the state directory.
pub const ROUND_FILE: &str = "smarthost.json";

impl RoundReport {
    /// Counts one recipient's outcome.
    pub fn count(&mut self, outcome: &Outcome) {
        let why = match outcome {
            Outcome::Delivered(_) => {
                self.delivered += 1;
                return;
            }
            Outcome::Deferred(why)
            | Outcome::Again(why)
            | Outcome::Failed {
                diagnostic: why, ..
            } => why,
        };
        if matches!(outcome, Outcome::Failed { .. }) {
            self.failed += 1;
        } else {
            self.deferred += 1;
        }
        if self.problem.is_none() {
            self.problem = Some(why.clone());
        }
    }

    /// One line for `skywave status`.
    pub fn describe(&self) -> String {
        let date = skywave_smtp::rfc5322_date(skywave_smtp::DateTime {
            unix_seconds: i64::try_from(self.at).unwrap_or(0),
            offset_minutes: 0,
        });
        let link = match &self.offers {
            None => "no connection".to_owned(),
            Some(offers) => format!(
                "{}; offers {}",
                if self.tls { "TLS" } else { "plain" },
                if offers.is_empty() {
                    "nothing this gateway uses".to_owned()
                } else {
                    offers.join(", ")
                }
            ),
        };
        let mut line = format!(
            "{}, last round {date}: {} delivered, {} deferred, {} failed ({link})",
            self.host, self.delivered, self.deferred, self.failed
        );
        if let Some(p) = &self.problem {
            line.push_str(&format!("; {p}"));
        }
        line
    }
}

/// The smarthost, as the deliveries of a round see it.
#[derive(Debug, Clone, Copy)]
pub struct Hop<'a> {
    /// Host name or address.
    pub host: &'a str,
    /// Port.
    pub port: u16,
    /// Time allowed for the connection, and for each message's transaction.
    pub timeout: Duration,
    /// TLS towards it.
    pub tls: &'a SmarthostTls,
    /// The name and password it wants, if any (sent only over TLS: the configuration sees to
    /// it).
    pub auth: Option<&'a SmarthostAuth>,
}

impl Hop<'_> {
    fn name(&self) -> String {
        format!("smarthost {}", host_port(self.host, self.port))
    }
}

/// `host:port`, an IPv6 address in brackets (`[fd00::25]:25`) as a socket address is written:
/// how the smarthost is named in the log, in `skywave status` and in `skywave check`.
pub fn host_port(host: &str, port: u16) -> String {
    if host.contains(':') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    }
}

/// An open connection to the smarthost and what its EHLO offered.
pub struct Connection {
    conn: AsyncSmtpConnection,
    offers: Extensions,
    /// A transaction may be open (one ended early): RSET before the next MAIL.
    dirty: bool,
}

impl std::fmt::Debug for Connection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connection")
            .field("offers", &self.offers)
            .field("dirty", &self.dirty)
            .finish_non_exhaustive()
    }
}

/// A message's text for [`Connection::transaction`]: as queued (for what its header fields
/// need), and as the smarthost may take it ([`Connection::fitted`]), or why it cannot go.
#[derive(Debug, Clone, Copy)]
struct Text<'a> {
    original: &'a [u8],
    fitted: Result<&'a [u8], &'a str>,
}

/// The connection broke (or timed out) in a transaction: every recipient not yet decided is
/// deferred with this text, and the connection is not used again.
#[derive(Debug)]
struct Broken(String);

impl Connection {
    /// Connects, says EHLO, starts TLS as `[delivery] tls` says, and reads the offers.
    /// The error is the reason to defer the round's mail.
    pub async fn open(hop: &Hop<'_>, hello: &str) -> Result<Connection, String> {
        let name = hop.name();
        match tokio::time::timeout(hop.timeout, Self::open_inner(hop, hello)).await {
            Ok(Ok(c)) => Ok(c),
            Ok(Err(e)) => Err(format!("{name}: {e}")),
            Err(_) => Err(format!(
                "{name}: no answer within {} s",
                hop.timeout.as_secs()
            )),
        }
    }

    async fn open_inner(hop: &Hop<'_>, hello: &str) -> Result<Connection, String> {
        let hello = ClientId::Domain(hello.to_owned());
        let tls = tls_parameters(hop.host, hop.tls).map_err(|e| format!("TLS set-up: {e}"))?;
        let implicit = match &tls {
            Tls::Wrapper(p) => Some(p.clone()),
            _ => None,
        };
        let mut conn = AsyncSmtpConnection::connect_tokio1(
            (hop.host, hop.port),
            Some(hop.timeout),
            &hello,
            implicit,
            None,
        )
        .await
        .map_err(|e| e.to_string())?;
        match tls {
            Tls::Opportunistic(p) if conn.can_starttls() => conn.starttls(p, &hello).await,
            Tls::Required(p) => conn.starttls(p, &hello).await,
            _ => Ok(()),
        }
        .map_err(|e| format!("STARTTLS: {e}"))?;
        if let Some(a) = hop.auth {
            // A refusal (535) is this gateway's configuration, not the mail's fault: the error
            // defers the round's mail and says why.
            let credentials = Credentials::new(a.user.clone(), a.password.clone());
            conn.auth(&[Mechanism::Plain, Mechanism::Login], &credentials)
                .await
                .map_err(|e| {
                    format!(
                        "AUTH as {:?} failed ({e}); check [delivery] auth_file",
                        a.user
                    )
                })?;
        }
        let ehlo = conn
            .command(Ehlo::new(hello))
            .await
            .map_err(|e| format!("EHLO: {e}"))?;
        Ok(Connection {
            offers: Extensions::from_ehlo(&reply_of(&ehlo)),
            conn,
            dirty: false,
        })
    }

    /// Whether the smarthost offers DSN (RFC 3461).
    pub fn offers_dsn(&self) -> bool {
        self.offers.dsn
    }

    /// Notes in `report` how the connection stands: encrypted or not, and the extensions its
    /// EHLO offered that this gateway uses.
    pub fn describe_into(&self, report: &mut RoundReport) {
        report.tls = self.conn.is_encrypted();
        report.offers = Some(
            [
                ("DSN", self.offers.dsn),
                ("SIZE", self.offers.size.is_some()),
                ("8BITMIME", self.offers.eight_bit_mime),
                ("SMTPUTF8", self.offers.smtputf8),
            ]
            .into_iter()
            .filter(|(_, on)| *on)
            .map(|(k, _)| k.to_owned())
            .collect(),
        );
    }

    /// Sends `msg` (its queued text `body`) in one transaction. Every due recipient comes back
    /// once, with what the smarthost said of it; the connection is gone when it broke.
    pub async fn send(
        mut self,
        hop: &Hop<'_>,
        msg: &DueMessage,
        body: &[u8],
    ) -> (Option<Connection>, Vec<(String, Outcome)>) {
        let mut decided = Vec::with_capacity(msg.recipients.len());
        let mut pending: Vec<&str> = msg.recipients.iter().map(String::as_str).collect();
        // Made to fit the smarthost once, whatever the number of transactions.
        let fitted = self.fitted(msg, body);
        let text = Text {
            original: body,
            fitted: fitted.as_deref().map_err(String::as_str),
        };
        // Bounded: a transaction that gives back recipients delivered at least one other.
        let kept = loop {
            let txn = self.transaction(hop, msg, &pending, text, &mut decided);
            match tokio::time::timeout(hop.timeout, txn).await {
                Ok(Ok(more)) if !more.is_empty() => pending = more,
                Ok(Ok(_)) => break Some(self),
                broken => {
                    let why = match broken {
                        Ok(Err(Broken(why))) => why,
                        _ => format!(
                            "{}: no answer within {} s",
                            hop.name(),
                            hop.timeout.as_secs()
                        ),
                    };
                    // Dropped, not aborted: lettre's abort says QUIT and waits for the reply of a
                    // server that may never answer.
                    drop(self);
                    let done: Vec<String> = decided.iter().map(|(r, _)| r.clone()).collect();
                    for r in &msg.recipients {
                        if !done.contains(r) {
                            decided.push((r.clone(), Outcome::Deferred(why.clone())));
                        }
                    }
                    break None;
                }
            }
        };
        // In the message's order, as the log and the records read best.
        decided.sort_by_key(|(r, _)| msg.recipients.iter().position(|x| x == r));
        (kept, decided)
    }

    /// One transaction of `msg` for the recipients `pending`, each decided into `decided`,
    /// except those refused with 452 (too many recipients, RFC 5321 section 4.5.3.1.10) in a
    /// transaction that delivered others: those are given back for the next transaction, at
    /// once, rather than waiting out a retry.
    async fn transaction<'m>(
        &mut self,
        hop: &Hop<'_>,
        msg: &'m DueMessage,
        pending: &[&str],
        text: Text<'_>,
        decided: &mut Vec<(String, Outcome)>,
    ) -> Result<Vec<&'m str>, Broken> {
        let peer = hop.name();
        let broken =
            |what: &str, e: lettre::transport::smtp::Error| Broken(format!("{peer}: {what}: {e}"));
        if self.dirty {
            self.conn
                .command(Rset)
                .await
                .map_err(|e| broken("RSET", e))?;
            self.dirty = false;
        }
        let all = |decided: &mut Vec<(String, Outcome)>, rcpts: &[String], o: Outcome| {
            decided.extend(rcpts.iter().map(|r| (r.clone(), o.clone())));
        };
        // The envelope as lettre's types take it; an address it cannot carry fails alone.
        let from = if msg.sender.is_empty() {
            None
        } else {
            match msg.sender.parse::<Address>() {
                Ok(a) => Some(a),
                Err(e) => {
                    let o = Outcome::Failed {
                        status: "5.1.7".into(),
                        diagnostic: format!(
                            "sender <{}> cannot be sent over SMTP: {e}",
                            msg.sender
                        ),
                    };
                    let these: Vec<String> = pending.iter().map(|r| (*r).to_owned()).collect();
                    all(decided, &these, o);
                    return Ok(Vec::new());
                }
            }
        };
        let mut to = Vec::with_capacity(pending.len());
        for (i, r) in msg.recipients.iter().enumerate() {
            if !pending.contains(&r.as_str()) {
                continue;
            }
            match r.parse::<Address>() {
                Ok(a) => to.push((r, a, msg.rcpt_dsn.get(i).cloned().unwrap_or_default())),
                Err(e) => decided.push((
                    r.clone(),
                    Outcome::Failed {
                        status: "5.1.3".into(),
                        diagnostic: format!("recipient <{r}> cannot be sent over SMTP: {e}"),
                    },
                )),
            }
        }
        if to.is_empty() {
            return Ok(Vec::new());
        }
        let undecided: Vec<String> = to.iter().map(|(r, _, _)| (*r).clone()).collect();
        let (params, body) = match self.mail_parameters(msg, text, &to) {
            Ok(p) => p,
            Err(why) => {
                all(
                    decided,
                    &undecided,
                    Outcome::Deferred(format!("{peer}: {why}")),
                );
                return Ok(Vec::new());
            }
        };
        let dsn = self.offers.dsn;
        let how = Handoff::onward(dsn);
        match answer(self.conn.command(Mail::new(from, params)).await) {
            Answer::Reply(r) if r.is_positive() => {}
            Answer::Reply(r) => {
                all(decided, &undecided, Outcome::from_reply(&peer, &r, how));
                return Ok(Vec::new());
            }
            Answer::Broken(e) => return Err(broken("MAIL", e)),
        }
        self.dirty = true;
        let mut accepted = Vec::with_capacity(to.len());
        let mut too_many = Vec::new();
        for (r, address, rdsn) in to {
            let mut params = Vec::new();
            if dsn {
                if let Some(n) = rdsn.notify {
                    params.push(RcptParameter::Other {
                        keyword: "NOTIFY".into(),
                        value: Some(n.to_string()),
                    });
                }
                if let Some(o) = rdsn.orcpt {
                    // lettre writes the value as xtext.
                    params.push(RcptParameter::Other {
                        keyword: "ORCPT".into(),
                        value: Some(format!("rfc822;{o}")),
                    });
                }
            }
            match answer(self.conn.command(Rcpt::new(address, params)).await) {
                Answer::Reply(reply) if reply.is_positive() => accepted.push(r.clone()),
                Answer::Reply(reply) if reply.code == 452 => too_many.push((r, reply)),
                Answer::Reply(reply) => {
                    decided.push((r.clone(), Outcome::from_reply(&peer, &reply, how)));
                }
                Answer::Broken(e) => return Err(broken("RCPT", e)),
            }
        }
        if accepted.is_empty() {
            // Nothing to send: end the transaction before the next one. The 452s are this
            // attempt's answer: a retry will tell.
            for (r, reply) in too_many {
                decided.push((r.clone(), Outcome::from_reply(&peer, &reply, how)));
            }
            return Ok(Vec::new());
        }
        // The others go in the next transaction if this one delivers, and wait otherwise.
        let mut again: Vec<&str> = Vec::new();
        let mut give_back = |delivered: bool, decided: &mut Vec<(String, Outcome)>| {
            for (r, reply) in &too_many {
                if delivered {
                    again.push(r.as_str());
                } else {
                    decided.push(((*r).clone(), Outcome::from_reply(&peer, reply, how)));
                }
            }
        };
        match answer(self.conn.command(Data).await) {
            Answer::Reply(r) if r.code == 354 => {}
            Answer::Reply(r) => {
                all(decided, &accepted, Outcome::from_reply(&peer, &r, how));
                give_back(false, decided);
                return Ok(again);
            }
            Answer::Broken(e) => return Err(broken("DATA", e)),
        }
        let lines = body.strip_suffix(b"\r\n").unwrap_or(body);
        match answer(self.conn.message(lines).await) {
            Answer::Reply(r) => {
                // The transaction is over, whatever the reply.
                self.dirty = false;
                all(decided, &accepted, Outcome::from_reply(&peer, &r, how));
                give_back(r.is_positive(), decided);
                Ok(again)
            }
            Answer::Broken(e) => Err(broken("the message text", e)),
        }
    }

    /// MAIL's parameters for `msg` and the text to send (8-bit text made 7-bit for a smarthost
    /// without `8BITMIME`), or why the smarthost cannot take it (an extension it lacks).
    fn mail_parameters<'b>(
        &self,
        msg: &DueMessage,
        text: Text<'b>,
        to: &[(&String, Address, skywave_smtp::RcptDsn)],
    ) -> Result<(Vec<MailParameter>, &'b [u8]), String> {
        let mut params = Vec::new();
        let recipients = || to.iter().map(|(r, _, _)| r.as_str());
        if skywave_smtp::downgrade::needs_smtputf8(&msg.sender, recipients(), text.original) {
            if self.offers.smtputf8 {
                params.push(MailParameter::SmtpUtfEight);
            } else if !msg.sender.is_ascii() || recipients().any(|r| !r.is_ascii()) {
                return Err(
                    "an address is not ASCII and the smarthost does not offer SMTPUTF8".into(),
                );
            }
        }
        let body = text.fitted.map_err(str::to_owned)?;
        if !body.is_ascii() {
            params.push(MailParameter::Body(MailBodyParameter::EightBitMime));
        }
        if self.offers.size.is_some() {
            params.push(MailParameter::Size(body.len()));
        }
        if self.offers.dsn {
            match msg.dsn.ret {
                Some(skywave_smtp::Ret::Full) => params.push(other("RET", "FULL")),
                Some(skywave_smtp::Ret::Hdrs) => params.push(other("RET", "HDRS")),
                None => {}
            }
            if let Some(id) = &msg.dsn.envid {
                // lettre writes the value as xtext.
                params.push(other("ENVID", id));
            }
        }
        Ok((params, body))
    }

    /// The message's text as this smarthost may take it: 8-bit text made 7-bit for one without
    /// `8BITMIME`, UTF-8 header fields made ASCII for one without `SMTPUTF8`; or why it cannot
    /// go. Worked out once per message, however many transactions a 452 splits it into.
    fn fitted<'b>(&self, msg: &DueMessage, original: &'b [u8]) -> Result<Cow<'b, [u8]>, String> {
        let mut body = Cow::Borrowed(original);
        if !original.is_ascii() {
            if !self.offers.eight_bit_mime {
                // RFC 6152 §3: convert, or do not send. The header fields are made ASCII with
                // the rest.
                body = skywave_smtp::downgrade::seven_bit(original).map_err(|e| {
                    format!(
                        "the message is 8-bit, the smarthost does not offer 8BITMIME, \
                         and it cannot be made 7-bit: {e}"
                    )
                })?;
                tracing::debug!(id = %msg.id, "8-bit parts made 7-bit for a smarthost without 8BITMIME");
            } else if !self.offers.smtputf8 {
                // RFC 6531 §3.2: UTF-8 header fields do not go to a server without SMTPUTF8
                // as they are; RFC 6857 downgrades them, the body stays 8-bit. Header fields
                // that are not UTF-8 have no text to encode: they go as they are, as all did
                // before this conversion, rather than strand the mail.
                match skywave_smtp::downgrade::ascii_headers(original) {
                    Ok(fitted) => {
                        if matches!(fitted, Cow::Owned(_)) {
                            tracing::debug!(id = %msg.id, "UTF-8 header fields made ASCII for a smarthost without SMTPUTF8");
                        }
                        body = fitted;
                    }
                    Err(e) => {
                        tracing::info!(id = %msg.id, "8-bit header fields go as they are to a smarthost without SMTPUTF8: {e}");
                    }
                }
            }
        }
        Ok(body)
    }

    /// Ends the connection politely (the end of a round).
    pub async fn close(mut self, timeout: Duration) {
        let _ = tokio::time::timeout(timeout, self.conn.command(Quit)).await;
    }
}

fn other(keyword: &str, value: &str) -> MailParameter {
    MailParameter::Other {
        keyword: keyword.to_owned(),
        value: Some(value.to_owned()),
    }
}

/// What one command brought: a reply (positive or not), or a broken connection.
enum Answer {
    Reply(Reply),
    Broken(lettre::transport::smtp::Error),
}

/// lettre returns a negative reply as an error with its code and joined text; both kinds become
/// a [`Reply`] here, so that one rule ([`Outcome::from_reply`]) reads every reply.
fn answer(result: Result<Response, lettre::transport::smtp::Error>) -> Answer {
    match result {
        Ok(r) => Answer::Reply(reply_of(&r)),
        Err(e) => match e.status() {
            Some(code) => {
                let text =
                    std::error::Error::source(&e).map_or_else(String::new, |s| s.to_string());
                Answer::Reply(parse_reply(&format!("{code} {}\r\n", one_line(&text))))
            }
            None => Answer::Broken(e),
        },
    }
}

/// A lettre response as skywave-smtp's [`Reply`] (its enhanced status code read the same way
/// as every other reply's).
fn reply_of(r: &Response) -> Reply {
    let code = r.code().to_string();
    let lines: Vec<&str> = r.message().collect();
    let mut wire = String::new();
    for (i, line) in lines.iter().enumerate() {
        let sep = if i + 1 == lines.len() { ' ' } else { '-' };
        wire.push_str(&format!("{code}{sep}{}\r\n", one_line(line)));
    }
    if lines.is_empty() {
        wire = format!("{code} \r\n");
    }
    parse_reply(&wire)
}

fn parse_reply(wire: &str) -> Reply {
    let mut p = ReplyParser::default();
    p.push(wire.as_bytes());
    match p.next_reply() {
        Ok(Some(r)) => r,
        // Only a reply lettre parsed reaches here; keep its code if ours disagrees.
        _ => Reply::plain(
            wire.get(..3).and_then(|c| c.parse().ok()).unwrap_or(451),
            wire.get(4..).unwrap_or("").trim_end().to_owned(),
        ),
    }
}

fn one_line(s: &str) -> String {
    s.replace(['\r', '\n'], " ")
}

/// lettre's TLS setting for the smarthost: the public web roots plus the configured ones, the
/// certificate checked against the host name we connect to.
pub fn tls_parameters(
    host: &str,
    tls: &SmarthostTls,
) -> Result<Tls, lettre::transport::smtp::Error> {
    use lettre::transport::smtp::client::Certificate;
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
        SmarthostTls::Implicit { ca } => Tls::Wrapper(params(ca)?),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use skywave_smtp::{MailDsn, Notify, RcptDsn, Ret};
    use skywave_spool::{Priority, QueueId};
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
    use tokio::net::TcpListener;

    /// A scripted SMTP server on 127.0.0.1: for each command line it reads, the next reply of
    /// `replies` ("" to never answer); the message text after a 354 is read up to its ".".
    /// Returns its port and the lines it read.
    async fn server(replies: Vec<&'static str>) -> (u16, tokio::task::JoinHandle<Vec<String>>) {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let port = listener.local_addr().expect("addr").port();
        let task = tokio::spawn(async move {
            let (sock, _) = listener.accept().await.expect("accept");
            let (r, mut w) = sock.into_split();
            let mut r = BufReader::new(r);
            let mut seen = Vec::new();
            w.write_all(b"220 smarthost.lan ESMTP\r\n")
                .await
                .expect("greet");
            let mut after_text = false;
            for reply in replies {
                let mut line = String::new();
                // The reply to the message text answers its ".", not a new command line.
                if !std::mem::take(&mut after_text) {
                    if r.read_line(&mut line).await.unwrap_or(0) == 0 {
                        break;
                    }
                    seen.push(line.trim_end().to_owned());
                }
                if reply.is_empty() {
                    // Never answer; hold the connection until the client drops it.
                    let _ = r.read_line(&mut line).await;
                    break;
                }
                w.write_all(reply.as_bytes()).await.expect("reply");
                if reply.starts_with("354") {
                    // Octets, not UTF-8: the text may hold any.
                    let mut text = Vec::new();
                    while text != b".\r\n" {
                        text.clear();
                        if r.read_until(b'\n', &mut text).await.unwrap_or(0) == 0 {
                            break;
                        }
                        seen.push(format!(
                            "text: {}",
                            String::from_utf8_lossy(&text).trim_end()
                        ));
                    }
                    after_text = true;
                }
            }
            seen
        });
        (port, task)
    }

    fn message(rcpts: &[&str]) -> DueMessage {
        DueMessage {
            id: QueueId::parse("006B0D30E2000000005B054E").expect("id"),
            priority: Priority::NORMAL,
            arrival: 0,
            size: 30,
            sender: "a@ship.test".into(),
            recipients: rcpts.iter().map(|r| (*r).to_owned()).collect(),
            dsn: MailDsn {
                ret: Some(Ret::Hdrs),
                envid: Some("order 42".into()),
            },
            rcpt_dsn: rcpts
                .iter()
                .map(|_| RcptDsn {
                    notify: Some(Notify {
                        success: true,
                        failure: true,
                        delay: false,
                    }),
                    orcpt: None,
                })
                .collect(),
        }
    }

    static PLAIN: SmarthostTls = SmarthostTls::None;

    /// The scripted server on `port`, plain SMTP, no AUTH.
    /// A smarthost's replies for `n` messages, one recipient each, after `ehlo` (which both
    /// lettre's EHLO and the connection's own get).
    fn messages_after(ehlo: &'static str, n: usize) -> Vec<&'static str> {
        let mut replies = vec![ehlo, ehlo];
        for _ in 0..n {
            replies.extend(["250 ok\r\n", "250 ok\r\n", "354 go\r\n", "250 queued\r\n"]);
        }
        replies.push("221 bye\r\n");
        replies
    }

    /// Sends `body` to `rcpts` over `conn`, which must deliver it and stay open.
    async fn delivered(conn: Connection, hop: &Hop<'_>, rcpts: &[&str], body: &[u8]) -> Connection {
        let (next, outcomes) = conn.send(hop, &message(rcpts), body).await;
        assert!(
            matches!(outcomes[..], [(_, Outcome::Delivered(_))]),
            "{outcomes:?}"
        );
        next.expect("kept")
    }

    fn plain_hop(port: u16, timeout: Duration) -> Hop<'static> {
        Hop {
            host: "127.0.0.1",
            port,
            timeout,
            tls: &PLAIN,
            auth: None,
        }
    }

    const EHLO_DSN: &str = "250-smarthost.lan\r\n250-SIZE 100000\r\n250 DSN\r\n";

    #[tokio::test]
    async fn each_recipient_gets_its_own_reply_and_the_parameters_go_on() {
        let (port, seen) = server(vec![
            EHLO_DSN,
            EHLO_DSN,
            "250 2.1.0 ok\r\n",
            "250 2.1.5 ok\r\n",
            "452 4.5.3 too many recipients\r\n",
            "550 5.1.1 no such user\r\n",
            "452 4.5.3 too many recipients\r\n",
            "354 go on\r\n",
            "250 2.0.0 queued as 42\r\n",
            // The two refused with 452 go again at once, in a second transaction ...
            "250 2.1.0 ok\r\n",
            "250 2.1.5 ok\r\n",
            "452 4.5.3 too many recipients\r\n",
            "354 go on\r\n",
            "250 2.0.0 queued as 43\r\n",
            // ... and the one refused again in a third, where nothing is taken: it waits.
            "250 2.1.0 ok\r\n",
            "452 4.5.3 too many recipients\r\n",
            "221 bye\r\n",
        ])
        .await;
        let hop = plain_hop(port, Duration::from_secs(10));
        let conn = Connection::open(&hop, "gw.ship.test").await.expect("open");
        assert!(conn.offers_dsn());
        let rcpts = [
            "ok@lan.test",
            "busy@lan.test",
            "gone@lan.test",
            "late@lan.test",
        ];
        let msg = message(&rcpts);
        let body = b"Subject: x\r\n\r\n.dot\r\nbody\r\n";
        let (conn, outcomes) = conn.send(&hop, &msg, body).await;
        conn.expect("kept").close(hop.timeout).await;
        let passed = Outcome::Delivered(Handoff::Passed);
        assert_eq!(outcomes.len(), 4);
        assert_eq!(outcomes[0], ("ok@lan.test".into(), passed.clone()));
        assert_eq!(outcomes[1], ("busy@lan.test".into(), passed));
        assert!(
            matches!(&outcomes[2], (r, Outcome::Failed { status, .. }) if r == "gone@lan.test" && status == "5.1.1")
        );
        assert!(
            matches!(&outcomes[3], (r, Outcome::Deferred(t)) if r == "late@lan.test" && t.contains("452"))
        );
        let seen = seen.await.expect("server");
        let mail = "MAIL FROM:<a@ship.test> SIZE=26 RET=HDRS ENVID=order+2042";
        let rcpt = |r: &str| format!("RCPT TO:<{r}> NOTIFY=SUCCESS,FAILURE");
        // Dot-stuffed, and no blank line added before the end.
        let text = [
            "text: Subject: x",
            "text: ",
            "text: ..dot",
            "text: body",
            "text: .",
        ];
        let mut expected: Vec<String> = vec![mail.into()];
        expected.extend(rcpts.iter().map(|r| rcpt(r)));
        expected.push("DATA".into());
        expected.extend(text.iter().map(|t| (*t).to_owned()));
        expected.extend([mail.into(), rcpt(rcpts[1]), rcpt(rcpts[3]), "DATA".into()]);
        expected.extend(text.iter().map(|t| (*t).to_owned()));
        expected.extend([mail.into(), rcpt(rcpts[3]), "QUIT".into()]);
        assert_eq!(seen[2..], expected[..]);
    }

    #[tokio::test]
    async fn to_a_smarthost_without_8bitmime_8bit_text_goes_as_7bit_or_waits() {
        const EHLO_7BIT: &str = "250-smarthost.lan\r\n250 SIZE 100000\r\n";
        let (port, seen) = server(vec![
            EHLO_7BIT,
            EHLO_7BIT,
            "250 2.1.0 ok\r\n",
            "250 2.1.5 ok\r\n",
            "354 go on\r\n",
            "250 2.0.0 queued\r\n",
            "221 bye\r\n",
        ])
        .await;
        let hop = plain_hop(port, Duration::from_secs(10));
        let conn = Connection::open(&hop, "gw.ship.test").await.expect("open");
        let body = "Subject: x\r\n\r\nSea 4, 270\u{b0}\r\n";
        let (conn, outcomes) = conn
            .send(&hop, &message(&["a@lan.test"]), body.as_bytes())
            .await;
        assert_eq!(
            outcomes,
            vec![("a@lan.test".into(), Outcome::Delivered(Handoff::Relayed))]
        );
        // A header field that is not UTF-8 cannot be made 7-bit: the mail waits, and nothing
        // is sent.
        let (conn, outcomes) = conn
            .expect("kept")
            .send(
                &hop,
                &message(&["b@lan.test"]),
                b"Subject: 270\xb0\r\n\r\nx\r\n",
            )
            .await;
        assert!(
            matches!(&outcomes[..], [(_, Outcome::Deferred(t))] if t.contains("8BITMIME") && t.contains("\"Subject\" holds 8-bit octets that are not UTF-8")),
            "{outcomes:?}"
        );
        conn.expect("kept").close(hop.timeout).await;
        let text = [
            "Subject: x",
            "MIME-Version: 1.0",
            "Content-Type: text/plain; charset=utf-8",
            "Content-Transfer-Encoding: quoted-printable",
            "",
            "Sea 4, 270=C2=B0",
        ];
        // SIZE is the size of what is sent, with no BODY=8BITMIME.
        let size = text.iter().map(|l| l.len() + 2).sum::<usize>();
        let mut expected = vec![
            format!("MAIL FROM:<a@ship.test> SIZE={size}"),
            "RCPT TO:<a@lan.test>".into(),
            "DATA".into(),
        ];
        expected.extend(text.iter().map(|t| format!("text: {t}")));
        expected.extend(["text: .".into(), "QUIT".into()]);
        assert_eq!(seen.await.expect("server")[2..], expected[..]);
    }

    #[tokio::test]
    async fn utf8_header_fields_go_made_ascii_to_a_smarthost_without_smtputf8() {
        const EHLO_8BIT: &str = "250-smarthost.lan\r\n250 8BITMIME\r\n";
        let (port, seen) = server(messages_after(EHLO_8BIT, 3)).await;
        let hop = plain_hop(port, Duration::from_secs(10));
        let mut conn = Connection::open(&hop, "gw.ship.test").await.expect("open");
        for body in [
            &b"Subject: Gr\xc3\xbc\xc3\x9fe\r\n\r\nx\r\n"[..],
            b"Subject: Gr\xc3\xbc\xc3\x9fe\r\n\r\nK\xc3\xb8ye\r\n",
            // Not UTF-8: no text to encode, so it goes as it is, as before, not stranded.
            b"Subject: Gr\xfc\xdfe\r\n\r\nx\r\n",
        ] {
            conn = delivered(conn, &hop, &["a@lan.test"], body).await;
        }
        conn.close(hop.timeout).await;
        let seen = seen.await.expect("server");
        let lines: Vec<&str> = seen
            .iter()
            .map(String::as_str)
            .filter(|l| l.starts_with("MAIL") || l.starts_with("text: Subject"))
            .collect();
        // No SMTPUTF8; BODY=8BITMIME only where the body is still 8-bit.
        assert_eq!(
            lines,
            [
                "MAIL FROM:<a@ship.test>",
                "text: Subject: =?utf-8?b?R3LDvMOfZQ==?=",
                "MAIL FROM:<a@ship.test> BODY=8BITMIME",
                "text: Subject: =?utf-8?b?R3LDvMOfZQ==?=",
                "MAIL FROM:<a@ship.test> BODY=8BITMIME",
                "text: Subject: Gr\u{fffd}\u{fffd}e",
            ]
        );
    }

    #[tokio::test]
    async fn smtputf8_goes_with_utf8_header_fields_or_addresses_where_offered() {
        const EHLO_UTF8: &str = "250-smarthost.lan\r\n250-8BITMIME\r\n250 SMTPUTF8\r\n";
        let (port, seen) = server(messages_after(EHLO_UTF8, 2)).await;
        let hop = plain_hop(port, Duration::from_secs(10));
        let conn = Connection::open(&hop, "gw.ship.test").await.expect("open");
        let header = "Subject: Gr\u{fc}\u{df}e\r\n\r\nx\r\n";
        let conn = delivered(conn, &hop, &["a@lan.test"], header.as_bytes()).await;
        let conn = delivered(conn, &hop, &["m\u{f8}ller@lan.test"], b"x\r\n").await;
        conn.close(hop.timeout).await;
        let seen = seen.await.expect("server");
        let mails: Vec<&String> = seen.iter().filter(|l| l.starts_with("MAIL")).collect();
        assert_eq!(
            mails,
            [
                "MAIL FROM:<a@ship.test> SMTPUTF8 BODY=8BITMIME",
                "MAIL FROM:<a@ship.test> SMTPUTF8"
            ]
        );
    }

    #[tokio::test]
    async fn a_smarthost_that_stops_answering_defers_everything_and_is_let_go() {
        let (port, seen) = server(vec![EHLO_DSN, "250 smarthost.lan\r\n", ""]).await;
        let hop = plain_hop(port, Duration::from_millis(500));
        let conn = Connection::open(&hop, "gw.ship.test").await.expect("open");
        assert!(!conn.offers_dsn());
        let (conn, outcomes) = conn
            .send(&hop, &message(&["a@lan.test", "b@lan.test"]), b"x\r\n")
            .await;
        assert!(conn.is_none());
        assert_eq!(outcomes.len(), 2);
        for (_, o) in &outcomes {
            assert!(
                matches!(o, Outcome::Deferred(t) if t.contains("no answer within")),
                "{o:?}"
            );
        }
        // Without DSN offered, no DSN parameter was sent.
        assert_eq!(seen.await.expect("server")[2], "MAIL FROM:<a@ship.test>");
    }

    #[test]
    fn a_refusal_keeps_its_code_and_enhanced_status() {
        let r = parse_reply("550 5.1.1 no such user here\r\n");
        assert_eq!(r.code, 550);
        assert_eq!(r.enhanced.map(|e| e.to_string()).as_deref(), Some("5.1.1"));
        match Outcome::from_reply("smarthost h:25", &r, Handoff::Relayed) {
            Outcome::Failed { status, diagnostic } => {
                assert_eq!(status, "5.1.1");
                assert!(diagnostic.contains("550"), "{diagnostic}");
            }
            other => panic!("{other:?}"),
        }
        let r = parse_reply("452 4.5.3 too many recipients\r\n");
        assert!(matches!(
            Outcome::from_reply("h", &r, Handoff::Relayed),
            Outcome::Deferred(_)
        ));
    }

    #[test]
    fn a_multiline_response_keeps_its_lines() {
        use lettre::transport::smtp::response::{Category, Code, Detail, Severity};
        let r = Response::new(
            Code::new(
                Severity::PositiveCompletion,
                Category::MailSystem,
                Detail::Zero,
            ),
            vec!["smarthost.lan".into(), "SIZE 1000".into(), "DSN".into()],
        );
        let reply = reply_of(&r);
        assert_eq!(reply.code, 250);
        assert_eq!(reply.lines, ["smarthost.lan", "SIZE 1000", "DSN"]);
        let ext = Extensions::from_ehlo(&reply);
        assert!(ext.dsn);
        assert_eq!(ext.size, Some(1000));
        assert!(!ext.smtputf8);
        let utf8 = Response::new(r.code(), vec!["smarthost.lan".into(), "SMTPUTF8".into()]);
        assert!(Extensions::from_ehlo(&reply_of(&utf8)).smtputf8);
    }
}
