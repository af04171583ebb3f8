//! skywave's `XRESUME`: a session cut short by a lost link goes on from where the peer's node
//! had it, instead of going again whole.
//!
//! Sits beside [`crate::cut`], between the HMTP client and server of two skywave gateways, on
//! the U_PDU stream of one SAP. A session is one stream of U_PDUs; the sending node confirms
//! each one the peer's node has (SIS node delivery confirmation) and refuses the rest when it
//! gives the link up. Today's answer to a cut, the cut marker, drops what the peer has and
//! sends the whole session again: a 100 kB report cut in its ninth minute at 1200 bit/s costs
//! those nine minutes of air a second time. Resume markers and digests work on whole U_PDUs,
//! which the subnetwork keeps intact and in order, so neither end needs to know the stream's
//! compression:
//!
//! - The client keeps the U_PDUs of a cut session and the number `from` that the peer's node
//!   confirmed, in order from the first. Its next session is [`resumption`]: a [`Marker`]
//!   naming `from`, the session's count of U_PDUs and a [`digest`] of the first `from`, then
//!   U_PDUs `from..` of the cut session. It then waits for the replies to the whole session,
//!   as it would have.
//! - A server that advertises [`KEYWORD`] keeps the U_PDUs it received of a session that ended
//!   without its `QUIT` (its [`Tape`]). At a marker whose digest matches the first `from` of
//!   them, it goes on with that session: it drops the U_PDUs that follow the marker and that it
//!   already holds ([`Resumption::copies`]: the node may have delivered more than it confirmed),
//!   and reads the rest as the session's own. A session it had already given up (its idle
//!   timeout) it rebuilds by reading its tape again: the messages accepted then are duplicates
//!   now, answered 250 and not spooled twice, and the replies at `QUIT` answer the whole
//!   session, as the client expects.
//! - Without a matching tape (the server restarted, or took another stream since), it answers
//!   [`REFUSAL`] at once and drops the resumed session's U_PDUs that follow the marker
//!   ([`Marker::following`]); the client then sends its mail again in a new session. A cut
//!   marker ([`crate::cut::MARKER`]) or a new stream ends a kept tape.
//!
//! The markers begin with a NUL, like the cut marker, and so are no stream's text (see
//! [`crate::cut`] for why a session's own U_PDU cannot be one).

use std::fmt;

/// The EHLO keyword of a server that resumes sessions (the one the SMTP client recognises).
pub const KEYWORD: &str = skywave_smtp::client::RESUME_KEYWORD;

/// The start of a resume marker; the numbers and a NUL follow.
const PREFIX: &[u8] = b"\0skywave XRESUME ";

/// The longest resume marker: the prefix, two numbers of at most 7 digits, 8 hex digits, two
/// spaces and the closing NUL.
const MAX_MARKER: usize = PREFIX.len() + 7 + 1 + 7 + 1 + 8 + 1;

/// Most U_PDUs a resumable session may have (the marker's numbers are bounded by it): some
/// 2 GB at a 2048-octet MTU, far beyond any batch.
pub const MAX_UPDUS: u32 = 1_000_000;

/// What the server answers a resume marker it cannot match: the client sends its mail again.
pub const REFUSAL: &[u8] = b"\0skywave XRESUME: no such session here, send it again whole\0";

/// Whether `updu` is the server's refusal.
pub fn is_refusal(updu: &[u8]) -> bool {
    updu == REFUSAL
}

/// The resume marker: the first U_PDU of a session that goes on with a cut one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Marker {
    /// U_PDUs of the cut session that the peer's node confirmed, in order from the first: the
    /// peer holds at least these, and the resumed session carries the rest.
    pub from: u32,
    /// The cut session's count of U_PDUs.
    pub total: u32,
    /// [`digest`] of the first `from`.
    pub digest: u32,
}

/// A marker that is not well formed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("malformed XRESUME marker: {0}")]
pub struct MarkerError(&'static str);

impl Marker {
    /// The marker's octets.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = PREFIX.to_vec();
        out.extend_from_slice(
            format!("{} {} {:08x}", self.from, self.total, self.digest).as_bytes(),
        );
        out.push(0);
        out
    }

    /// `None` when `updu` is no resume marker; the marker, or why it is malformed, when it
    /// starts like one.
    pub fn parse(updu: &[u8]) -> Option<Result<Marker, MarkerError>> {
        let rest = updu.strip_prefix(PREFIX)?;
        Some(Self::parse_fields(updu.len(), rest))
    }

    fn parse_fields(len: usize, rest: &[u8]) -> Result<Marker, MarkerError> {
        if len > MAX_MARKER {
            return Err(MarkerError("longer than any marker"));
        }
        let Some((&0, fields)) = rest.split_last() else {
            return Err(MarkerError("no closing NUL"));
        };
        let text = std::str::from_utf8(fields).map_err(|_| MarkerError("not ASCII"))?;
        let mut words = text.split(' ');
        let mut number = |what| {
            let w = words.next().ok_or(MarkerError(what))?;
            if w.is_empty() || w.len() > 7 || !w.bytes().all(|b| b.is_ascii_digit()) {
                return Err(MarkerError(what));
            }
            w.parse::<u32>().map_err(|_| MarkerError(what))
        };
        let from = number("no count of U_PDUs held")?;
        let total = number("no count of the session's U_PDUs")?;
        let digest = match words.next() {
            Some(w) if w.len() == 8 && w.bytes().all(|b| b.is_ascii_hexdigit()) => {
                u32::from_str_radix(w, 16).map_err(|_| MarkerError("bad digest"))?
            }
            _ => return Err(MarkerError("no digest of eight hex digits")),
        };
        if words.next().is_some() {
            return Err(MarkerError("more than three fields"));
        }
        if from == 0 || from >= total || total > MAX_UPDUS {
            return Err(MarkerError("counts out of range (0 < held < total)"));
        }
        Ok(Marker {
            from,
            total,
            digest,
        })
    }

    /// How many U_PDUs of the cut session follow the marker in the resumed one.
    pub fn following(&self) -> usize {
        (self.total - self.from) as usize
    }
}

/// The digest a marker names: CRC-32 (IEEE) over each U_PDU's length (four octets, big-endian)
/// and octets, so that U_PDUs cut elsewhere do not match.
pub fn digest<U: AsRef<[u8]>>(updus: &[U]) -> u32 {
    let mut crc = flate2::Crc::new();
    for u in updus {
        let u = u.as_ref();
        crc.update(&u32::try_from(u.len()).unwrap_or(u32::MAX).to_be_bytes());
        crc.update(u);
    }
    crc.sum()
}

/// The submission that goes on with a cut session whose first `from` U_PDUs the peer's node
/// confirmed: the marker, then the rest. `None` when there is nothing to resume (`from` is 0,
/// or the whole session was confirmed) or the session is too long to name.
pub fn resumption(updus: &[Vec<u8>], from: usize) -> Option<Vec<Vec<u8>>> {
    if from == 0 || from >= updus.len() {
        return None;
    }
    let marker = Marker {
        from: u32::try_from(from).ok()?,
        total: u32::try_from(updus.len())
            .ok()
            .filter(|&t| t <= MAX_UPDUS)?,
        digest: digest(&updus[..from]),
    };
    let mut out = Vec::with_capacity(updus.len() - from + 1);
    out.push(marker.encode());
    out.extend(updus[from..].iter().cloned());
    Some(out)
}

/// The U_PDUs a server has received of one session, kept so that the session can go on after
/// a cut. Bounded: a tape over [`Tape::LIMIT`] octets is given up (the session then cannot be
/// resumed, and goes again whole).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Tape {
    updus: Vec<Vec<u8>>,
    octets: usize,
    overflowed: bool,
}

/// Why a resume marker does not go on with a tape.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Mismatch {
    /// No tape is kept (nothing was cut here, or it was given up).
    NoTape,
    /// The tape grew past [`Tape::LIMIT`] and was given up.
    Overflowed,
    /// The tape holds fewer U_PDUs than the client's node confirmed.
    Short {
        /// U_PDUs on the tape.
        held: usize,
        /// U_PDUs the marker says the peer holds.
        from: u32,
    },
    /// The tape holds more U_PDUs than the whole session the marker names.
    Long {
        /// U_PDUs on the tape.
        held: usize,
        /// The session's count.
        total: u32,
    },
    /// The first `from` U_PDUs are not those of the marker's session.
    OtherSession,
}

impl fmt::Display for Mismatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Mismatch::NoTape => f.write_str("no cut session of the peer's is kept here"),
            Mismatch::Overflowed => write!(
                f,
                "the cut session was longer than the {} octets kept of one",
                Tape::LIMIT
            ),
            Mismatch::Short { held, from } => write!(
                f,
                "{held} U_PDU(s) of the cut session are here, the peer's node confirmed {from}"
            ),
            Mismatch::Long { held, total } => write!(
                f,
                "{held} U_PDU(s) are here, more than the {total} of the session named"
            ),
            Mismatch::OtherSession => {
                f.write_str("the U_PDUs kept here are of another session (digest differs)")
            }
        }
    }
}

/// A marker that matched: how to read the U_PDUs that follow it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Resumption {
    /// The first U_PDUs after the marker that the tape already holds: copies, dropped.
    pub copies: usize,
}

impl Tape {
    /// Most octets kept of one session, 16 MiB: more than a day of air carries at 1200 bit/s
    /// (13 MB).
    pub const LIMIT: usize = 16 * 1024 * 1024;

    /// An empty tape.
    pub fn new() -> Tape {
        Tape::default()
    }

    /// Keeps `updu`, the session's next; gives the tape up past [`Tape::LIMIT`].
    pub fn record(&mut self, updu: &[u8]) {
        if self.overflowed {
            return;
        }
        self.octets += updu.len();
        if self.octets > Self::LIMIT {
            self.overflowed = true;
            self.updus = Vec::new();
            return;
        }
        self.updus.push(updu.to_vec());
    }

    /// U_PDUs kept.
    pub fn len(&self) -> usize {
        self.updus.len()
    }

    /// True when nothing is kept.
    pub fn is_empty(&self) -> bool {
        self.updus.is_empty()
    }

    /// The U_PDUs kept, in order: what a rebuilt session reads again.
    pub fn updus(&self) -> &[Vec<u8>] {
        &self.updus
    }

    /// Whether `marker` goes on with this session, and how.
    pub fn check(&self, marker: &Marker) -> Result<Resumption, Mismatch> {
        if self.overflowed {
            return Err(Mismatch::Overflowed);
        }
        let held = self.updus.len();
        if held < marker.from as usize {
            return Err(Mismatch::Short {
                held,
                from: marker.from,
            });
        }
        if held > marker.total as usize {
            return Err(Mismatch::Long {
                held,
                total: marker.total,
            });
        }
        if digest(&self.updus[..marker.from as usize]) != marker.digest {
            return Err(Mismatch::OtherSession);
        }
        Ok(Resumption {
            copies: held - marker.from as usize,
        })
    }

    /// Whether `updu`, the `n`th copy after a marker that matched, is the U_PDU the tape
    /// holds there (a copy that differs means the two ends are not in step).
    pub fn is_copy(&self, marker: &Marker, n: usize, updu: &[u8]) -> bool {
        self.updus
            .get(marker.from as usize + n)
            .is_some_and(|u| u == updu)
    }
}

/// What to do with a U_PDU from the peer, as far as resumption goes ([`Keeper::check`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// None of resumption's business: the U_PDU goes where it would have (to the session being
    /// served, to the replies being read, or it starts a new stream).
    Pass,
    /// A copy of a U_PDU the session being served has read already: dropped.
    Copy,
    /// Part of a resumed session that was refused: dropped.
    Discard,
    /// A copy that differs from the U_PDU read there: the two ends are out of step, and the
    /// session being served is given up (the client's reply timeout sends its mail again).
    OutOfStep,
    /// A resume marker that goes on with the session being served: it reads on, after
    /// `copies` U_PDUs it already has.
    GoOn {
        /// The copies that follow the marker.
        copies: usize,
    },
    /// A resume marker that goes on with a session given up earlier: serve a new session that
    /// first reads these U_PDUs again (and [`Keeper::read`] each), then reads on after
    /// `copies` U_PDUs it then has.
    Rebuild {
        /// The U_PDUs of the session given up, in order.
        updus: Vec<Vec<u8>>,
        /// The copies that follow the marker.
        copies: usize,
    },
    /// A resume marker that matches no session here: answer [`REFUSAL`]; the resumed
    /// session's U_PDUs that follow are dropped.
    Refuse(Mismatch),
    /// A resume marker that is not well formed: dropped (the client's reply timeout sends its
    /// mail again).
    Malformed(MarkerError),
}

/// The receiving side of `XRESUME` for one peer: the tape of the session being served and of
/// the last one that ended without its `QUIT`, and what each U_PDU from the peer is.
///
/// The owner calls [`Keeper::check`] first for every U_PDU from the peer, [`Keeper::started`]
/// when a session of the peer's starts, [`Keeper::read`] for every U_PDU that session reads
/// (the first included), and [`Keeper::ended`] when it ends.
#[derive(Debug, Default)]
pub struct Keeper {
    /// The tape of the session being served.
    open: Option<Tape>,
    /// The tape of the last session that ended without its QUIT.
    cut: Option<Tape>,
    after: After,
}

/// What the U_PDUs after a resume marker are.
#[derive(Debug, Default)]
enum After {
    #[default]
    Nothing,
    /// Copies of U_PDUs the open tape holds, from its `from`th.
    Copies {
        marker: Marker,
        seen: usize,
        copies: usize,
    },
    /// The rest of a refused resumption.
    Discard { left: usize },
}

impl Keeper {
    /// A keeper with nothing kept.
    pub fn new() -> Keeper {
        Keeper::default()
    }

    /// A keeper that holds `updus` as a session given up: what an owner that kept its tape on
    /// disk reads back after a restart (the session, in progress or given up then, ended
    /// without its `QUIT` here).
    pub fn with_cut_session<U: AsRef<[u8]>>(updus: &[U]) -> Keeper {
        let mut tape = Tape::new();
        for u in updus {
            tape.record(u.as_ref());
        }
        Keeper {
            open: None,
            cut: Some(tape).filter(|t| !t.is_empty()),
            after: After::Nothing,
        }
    }

    /// Whether a session the peer's server gave up is kept, ready to go on.
    pub fn holds_a_cut_session(&self) -> bool {
        self.cut.is_some()
    }

    /// What `updu`, the next U_PDU from the peer, is; `serving` while a session of the peer's
    /// is open here.
    pub fn check(&mut self, updu: &[u8], serving: bool) -> Verdict {
        let marker = Marker::parse(updu);
        let any_marker = marker.is_some() || crate::cut::is_marker(updu);
        match &mut self.after {
            // A marker ends whatever followed the last one: the client's node gave that
            // submission up and its next starts here.
            _ if any_marker => self.after = After::Nothing,
            After::Nothing => {}
            After::Discard { left } => {
                *left -= 1;
                if *left == 0 {
                    self.after = After::Nothing;
                }
                return Verdict::Discard;
            }
            After::Copies {
                marker,
                seen,
                copies,
            } => {
                let n = *seen;
                let same = self
                    .open
                    .as_ref()
                    .is_some_and(|t| t.is_copy(marker, n, updu));
                *seen += 1;
                if *seen == *copies {
                    self.after = After::Nothing;
                }
                return if same {
                    Verdict::Copy
                } else {
                    self.after = After::Nothing;
                    Verdict::OutOfStep
                };
            }
        }
        if crate::cut::is_marker(updu) {
            // The client gave its cut session up: nothing will go on with it.
            self.cut = None;
            return Verdict::Pass;
        }
        let marker = match marker {
            None => return Verdict::Pass,
            Some(Err(e)) => return Verdict::Malformed(e),
            Some(Ok(m)) => m,
        };
        let (tape, open) = if serving {
            (self.open.as_ref(), true)
        } else {
            (self.cut.as_ref(), false)
        };
        let checked = tape.map_or(Err(Mismatch::NoTape), |t| t.check(&marker));
        let verdict = match checked {
            Err(m) => {
                self.after = After::Discard {
                    left: marker.following(),
                };
                return Verdict::Refuse(m);
            }
            Ok(r) if open => Verdict::GoOn { copies: r.copies },
            Ok(r) => Verdict::Rebuild {
                updus: self.cut.take().map(|t| t.updus).unwrap_or_default(),
                copies: r.copies,
            },
        };
        let copies = match &verdict {
            Verdict::GoOn { copies } | Verdict::Rebuild { copies, .. } => *copies,
            _ => 0,
        };
        if copies > 0 {
            self.after = After::Copies {
                marker,
                seen: 0,
                copies,
            };
        }
        verdict
    }

    /// A session of the peer's starts: a cut one kept is not going on (a resumed session is
    /// rebuilt from what [`Keeper::check`] handed over).
    pub fn started(&mut self) {
        self.cut = None;
        self.open = Some(Tape::new());
    }

    /// The session being served read `updu`.
    pub fn read(&mut self, updu: &[u8]) {
        if let Some(t) = &mut self.open {
            t.record(updu);
        }
    }

    /// The session being served ended; `without_quit` when it timed out before its end, so
    /// that the client may go on with it.
    pub fn ended(&mut self, without_quit: bool) {
        let tape = self.open.take();
        if without_quit {
            self.cut = tape.filter(|t| !t.is_empty());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn session(n: usize) -> Vec<Vec<u8>> {
        (0..n).map(|i| vec![i as u8; 100 + i]).collect()
    }

    #[test]
    fn a_marker_reads_back_and_starts_with_a_nul() {
        let m = Marker {
            from: 3,
            total: 41,
            digest: 0x00c0_ffee,
        };
        let b = m.encode();
        assert_eq!(b, b"\0skywave XRESUME 3 41 00c0ffee\0");
        assert_eq!(b[0], 0, "no stream starts with a NUL");
        assert_eq!(Marker::parse(&b), Some(Ok(m)));
        assert_eq!(m.following(), 38);
        assert!(!crate::cut::is_marker(&b));
        assert_eq!(Marker::parse(crate::cut::MARKER), None);
        assert_eq!(Marker::parse(REFUSAL), None);
        assert_eq!(Marker::parse(b"EHLO ship.example\r\n"), None);
    }

    #[test]
    fn malformed_markers_are_named() {
        for (bad, why) in [
            (&b"\0skywave XRESUME 3 41 00c0ffee"[..], "no closing NUL"),
            (b"\0skywave XRESUME 3 41 c0ffee\0", "digest"),
            (b"\0skywave XRESUME 0 41 00c0ffee\0", "out of range"),
            (b"\0skywave XRESUME 41 41 00c0ffee\0", "out of range"),
            (b"\0skywave XRESUME 3 41 00c0ffee 1\0", "more than three"),
            (b"\0skywave XRESUME +3 41 00c0ffee\0", "held"),
            (
                b"\0skywave XRESUME 3  41 00c0ffee\0",
                "count of the session",
            ),
            (
                b"\0skywave XRESUME 3 99999999 00c0ffee\0",
                "count of the session",
            ),
            (b"\0skywave XRESUME 3 2000000 00c0ffee\0", "out of range"),
        ] {
            let e = Marker::parse(bad)
                .expect("starts like a marker")
                .expect_err("malformed");
            assert!(e.to_string().contains(why), "{e} for {bad:?}");
        }
        let long = [PREFIX, &[b'1'; 64][..], b"\0"].concat();
        assert!(matches!(Marker::parse(&long), Some(Err(_))));
    }

    #[test]
    fn a_resumption_carries_the_marker_and_the_rest() {
        let s = session(5);
        let r = resumption(&s, 2).expect("something to resume");
        assert_eq!(r.len(), 4);
        let m = Marker::parse(&r[0]).unwrap().unwrap();
        assert_eq!((m.from, m.total), (2, 5));
        assert_eq!(m.digest, digest(&s[..2]));
        assert_eq!(&r[1..], &s[2..]);
        assert_eq!(
            resumption(&s, 0),
            None,
            "nothing confirmed: nothing names the session"
        );
        assert_eq!(resumption(&s, 5), None, "all of it confirmed");
    }

    #[test]
    fn the_digest_sees_where_updus_are_cut() {
        let a = [b"abc".to_vec(), b"def".to_vec()];
        let b = [b"ab".to_vec(), b"cdef".to_vec()];
        assert_ne!(digest(&a), digest(&b));
        // CRC-32 (IEEE) of 00 00 00 03 'a' 'b' 'c' 00 00 00 03 'd' 'e' 'f'.
        assert_eq!(digest(&a), {
            let mut c = flate2::Crc::new();
            c.update(b"\0\0\0\x03abc\0\0\0\x03def");
            c.sum()
        });
    }

    #[test]
    fn a_tape_matches_its_own_session_only() {
        let s = session(6);
        let mut tape = Tape::new();
        assert_eq!(
            tape.check(
                &Marker::parse(&resumption(&s, 2).unwrap()[0])
                    .unwrap()
                    .unwrap()
            ),
            Err(Mismatch::Short { held: 0, from: 2 })
        );
        for u in &s[..4] {
            tape.record(u);
        }
        let m = Marker::parse(&resumption(&s, 2).unwrap()[0])
            .unwrap()
            .unwrap();
        assert_eq!(tape.check(&m), Ok(Resumption { copies: 2 }));
        assert!(tape.is_copy(&m, 0, &s[2]));
        assert!(tape.is_copy(&m, 1, &s[3]));
        assert!(!tape.is_copy(&m, 1, &s[2]));
        assert!(!tape.is_copy(&m, 2, &s[4]), "not on the tape");
        let other: Vec<Vec<u8>> = session(7)
            .into_iter()
            .map(|u| u.iter().map(|b| b ^ 0x55).collect())
            .collect();
        let m = Marker::parse(&resumption(&other, 2).unwrap()[0])
            .unwrap()
            .unwrap();
        assert_eq!(tape.check(&m), Err(Mismatch::OtherSession));
        let m = Marker::parse(&resumption(&s[..3], 2).unwrap()[0])
            .unwrap()
            .unwrap();
        assert_eq!(tape.check(&m), Err(Mismatch::Long { held: 4, total: 3 }));
        assert!(
            Mismatch::OtherSession
                .to_string()
                .contains("another session")
        );
    }

    #[test]
    fn a_tape_past_its_limit_is_given_up() {
        let mut tape = Tape::new();
        let big = vec![7u8; 2048];
        for _ in 0..=(Tape::LIMIT / big.len()) {
            tape.record(&big);
        }
        assert!(tape.is_empty());
        let m = Marker {
            from: 1,
            total: 2,
            digest: 0,
        };
        assert_eq!(tape.check(&m), Err(Mismatch::Overflowed));
    }

    proptest! {
        #[test]
        fn any_marker_round_trips(from in 1u32..MAX_UPDUS, extra in 1u32..1000, digest: u32) {
            let total = (from + extra).min(MAX_UPDUS);
            let m = Marker { from, total, digest };
            prop_assert_eq!(Marker::parse(&m.encode()), Some(Ok(m)));
        }

        #[test]
        fn parsing_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..80)) {
            let with_prefix = [PREFIX, &bytes[..]].concat();
            let _ = Marker::parse(&with_prefix);
            let _ = Marker::parse(&bytes);
        }

        #[test]
        fn a_tape_resumes_at_any_confirmed_count(
            (n, held, from) in (2usize..20)
                .prop_flat_map(|n| (Just(n), 1..=n))
                .prop_flat_map(|(n, held)| (Just(n), Just(held), 1..=held.min(n - 1)))
        ) {
            let s = session(n);
            let mut tape = Tape::new();
            for u in &s[..held] { tape.record(u); }
            let r = resumption(&s, from).unwrap();
            let m = Marker::parse(&r[0]).unwrap().unwrap();
            let ok = tape.check(&m).unwrap();
            prop_assert_eq!(ok.copies, held - from);
            // The copies, then the rest: together the session.
            let mut rebuilt = tape.updus().to_vec();
            for (i, u) in r[1..].iter().enumerate() {
                if i < ok.copies {
                    prop_assert!(tape.is_copy(&m, i, u));
                } else {
                    rebuilt.push(u.clone());
                }
            }
            prop_assert_eq!(rebuilt, s);
        }
    }
}
