//! Receiver de-duplication for HMTP: a message already accepted within a retention window is
//! acknowledged with 250 and dropped, so a batch retransmitted after a lost reply transmission
//! never delivers anything twice.
//!
//! Held by the receiving gateway across sessions (one cache per node, or per peer) and consulted
//! by [`crate::server::HmtpServer`] for every complete message. The key is the Message-ID header
//! value with the sender and the sorted recipients; a message without a Message-ID is keyed on a
//! 128-bit hash of the whole message and its envelope. Time is passed in; the cache is bounded
//! both by the window and by a maximum number of entries (the oldest go first).
//!
//! The cache holds each key's [`DedupKey::fingerprint`], a 128-bit FNV-1a digest that is the
//! same in every build and on every machine, so the gateway can write the fingerprints of
//! accepted messages to disk and seed a new cache with them after a restart
//! ([`DedupCache::remember`]): a sender that retransmits because the receiving gateway died
//! before its replies went out still delivers nothing twice.

use std::collections::{HashMap, VecDeque};
use std::time::{Duration, Instant};

/// Longest header section searched for Message-ID, in bytes.
const MAX_HEADER_SCAN: usize = 64 * 1024;
/// Longest Message-ID value kept, in bytes (RFC 5322 lines are at most 998).
const MAX_MESSAGE_ID: usize = 998;

/// What identifies a message for de-duplication.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum DedupKey {
    /// Message-ID header value, sender, sorted recipients.
    MessageId {
        /// The Message-ID value, trimmed (angle brackets kept).
        message_id: String,
        /// The reverse path.
        sender: String,
        /// The recipients, sorted.
        recipients: Vec<String>,
    },
    /// No Message-ID: a 128-bit hash of the message, sender and sorted recipients.
    Hash(u128),
}

impl DedupKey {
    /// The key of a message with this envelope.
    pub fn new(sender: &str, recipients: &[String], body: &[u8]) -> Self {
        let mut recipients = recipients.to_vec();
        recipients.sort();
        match message_id(body) {
            Some(message_id) => DedupKey::MessageId {
                message_id,
                sender: sender.to_owned(),
                recipients,
            },
            None => {
                let mut h = Fnv128::new();
                h.field(sender.as_bytes());
                for r in &recipients {
                    h.field(r.as_bytes());
                }
                h.field(body);
                DedupKey::Hash(h.finish())
            }
        }
    }

    /// A 128-bit digest of the key, stable across builds: what the cache stores and what a
    /// gateway persists.
    pub fn fingerprint(&self) -> u128 {
        match self {
            DedupKey::MessageId {
                message_id,
                sender,
                recipients,
            } => {
                let mut h = Fnv128::new();
                h.field(b"mid");
                h.field(message_id.as_bytes());
                h.field(sender.as_bytes());
                for r in recipients {
                    h.field(r.as_bytes());
                }
                h.finish()
            }
            DedupKey::Hash(v) => {
                let mut h = Fnv128::new();
                h.field(b"hash");
                h.field(&v.to_be_bytes());
                h.finish()
            }
        }
    }
}

/// FNV-1a, 128 bits: fixed constants, so a digest never changes between builds.
struct Fnv128(u128);

impl Fnv128 {
    const OFFSET: u128 = 0x6c62_272e_07bb_0142_62b8_2175_6295_c58d;
    const PRIME: u128 = 0x0000_0000_0100_0000_0000_0000_0000_013b;

    fn new() -> Self {
        Fnv128(Self::OFFSET)
    }

    /// Hashes a length-prefixed field, so ("ab","c") and ("a","bc") differ.
    fn field(&mut self, bytes: &[u8]) {
        for b in (bytes.len() as u64).to_be_bytes().iter().chain(bytes) {
            self.0 ^= u128::from(*b);
            self.0 = self.0.wrapping_mul(Self::PRIME);
        }
    }

    fn finish(&self) -> u128 {
        self.0
    }
}

/// The Message-ID header value of a message (unfolded and trimmed), if it has one.
pub fn message_id(message: &[u8]) -> Option<String> {
    let scan = &message[..message.len().min(MAX_HEADER_SCAN)];
    let mut lines = scan.split(|&b| b == b'\n').peekable();
    // Bounded by the scanned bytes.
    while let Some(line) = lines.next() {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        if line.is_empty() {
            return None;
        }
        let Some(colon) = line.iter().position(|&b| b == b':') else {
            continue;
        };
        if !line[..colon]
            .trim_ascii()
            .eq_ignore_ascii_case(b"message-id")
        {
            continue;
        }
        let mut value = line[colon + 1..].to_vec();
        while let Some(next) = lines.peek() {
            if next.first().is_some_and(|&b| b == b' ' || b == b'\t') {
                let next = next.strip_suffix(b"\r").unwrap_or(next);
                value.extend_from_slice(next);
                lines.next();
            } else {
                break;
            }
        }
        let value = String::from_utf8_lossy(value.trim_ascii()).into_owned();
        if value.is_empty() || value.len() > MAX_MESSAGE_ID {
            return None;
        }
        return Some(value);
    }
    None
}

/// Messages accepted recently, for de-duplication.
#[derive(Debug)]
pub struct DedupCache {
    window: Duration,
    capacity: usize,
    seen: HashMap<u128, Instant>,
    order: VecDeque<(Instant, u128)>,
    duplicates: u64,
}

impl DedupCache {
    /// A cache remembering accepted messages for `window`, at most `capacity` of them.
    pub fn new(window: Duration, capacity: usize) -> Self {
        Self {
            window,
            capacity: capacity.max(1),
            seen: HashMap::new(),
            order: VecDeque::new(),
            duplicates: 0,
        }
    }

    /// True if `key` was accepted within the window before `now`; counts the duplicate.
    pub fn check(&mut self, key: &DedupKey, now: Instant) -> bool {
        self.expire(now);
        let dup = self.seen.contains_key(&key.fingerprint());
        if dup {
            self.duplicates += 1;
        }
        dup
    }

    /// Records that `key` was accepted (its spool write is durable) at `now`.
    pub fn insert(&mut self, key: DedupKey, now: Instant) {
        self.remember(key.fingerprint(), now);
    }

    /// Records an accepted message by its [`DedupKey::fingerprint`], accepted at `at` (seeding
    /// the cache from disk after a restart).
    pub fn remember(&mut self, fingerprint: u128, at: Instant) {
        self.expire(at);
        if self.seen.insert(fingerprint, at).is_some() {
            // Re-accepted: the old queue entry stays but no longer decides expiry.
            self.order.retain(|(_, k)| *k != fingerprint);
        }
        self.order.push_back((at, fingerprint));
        // Bounded: each pass removes one entry.
        while self.seen.len() > self.capacity {
            let Some((_, old)) = self.order.pop_front() else {
                break;
            };
            self.seen.remove(&old);
        }
    }

    /// Entries held.
    pub fn len(&self) -> usize {
        self.seen.len()
    }

    /// True when nothing is held.
    pub fn is_empty(&self) -> bool {
        self.seen.is_empty()
    }

    /// Duplicates found so far.
    pub fn duplicates(&self) -> u64 {
        self.duplicates
    }

    fn expire(&mut self, now: Instant) {
        // Bounded: each pass removes one entry.
        while let Some((at, _)) = self.order.front() {
            if now.saturating_duration_since(*at) < self.window {
                break;
            }
            if let Some((_, key)) = self.order.pop_front() {
                self.seen.remove(&key);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rcpts(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn message_id_is_found_unfolded_and_only_in_the_header() {
        let m = b"From: a@b\r\nMessage-Id:\r\n <x1@ship>\r\nSubject: s\r\n\r\nbody\r\n";
        assert_eq!(message_id(m).as_deref(), Some("<x1@ship>"));
        let m = b"From: a@b\r\n\r\nMessage-ID: <in-body@x>\r\n";
        assert_eq!(message_id(m), None);
        assert_eq!(
            message_id(b"MESSAGE-ID:   <y@z>  \r\n\r\n").as_deref(),
            Some("<y@z>")
        );
        assert_eq!(message_id(b""), None);
    }

    #[test]
    fn key_ignores_recipient_order_but_not_the_sender() {
        let body = b"Message-ID: <1@a>\r\n\r\nx\r\n";
        let k1 = DedupKey::new("s@a", &rcpts(&["b@x", "a@x"]), body);
        let k2 = DedupKey::new("s@a", &rcpts(&["a@x", "b@x"]), body);
        let k3 = DedupKey::new("t@a", &rcpts(&["a@x", "b@x"]), body);
        assert_eq!(k1, k2);
        assert_ne!(k1, k3);
        let h1 = DedupKey::new("s@a", &rcpts(&["a@x"]), b"no id\r\n");
        let h2 = DedupKey::new("s@a", &rcpts(&["a@x"]), b"no id!\r\n");
        assert!(matches!(h1, DedupKey::Hash(_)));
        assert_ne!(h1, h2);
    }

    #[test]
    fn window_and_capacity_bound_the_cache() {
        let t0 = Instant::now();
        let mut c = DedupCache::new(Duration::from_secs(60), 2);
        let k = |n: u8| DedupKey::new("s", &rcpts(&["r"]), &[n]);
        c.insert(k(1), t0);
        assert!(c.check(&k(1), t0 + Duration::from_secs(59)));
        assert!(!c.check(&k(1), t0 + Duration::from_secs(60)));
        assert!(c.is_empty());
        c.insert(k(1), t0);
        c.insert(k(2), t0);
        c.insert(k(3), t0);
        assert_eq!(c.len(), 2);
        assert!(!c.check(&k(1), t0));
        assert!(c.check(&k(3), t0));
        assert_eq!(c.duplicates(), 2);
    }

    #[test]
    fn fingerprints_are_fixed_and_seed_a_new_cache() {
        // A fixed vector: the digest must never change between builds, or a restarted gateway
        // would forget what it accepted before an upgrade.
        let k = DedupKey::new("s@a", &rcpts(&["b@x"]), b"Message-ID: <1@a>\r\n\r\nx\r\n");
        let fp = k.fingerprint();
        assert_eq!(
            fp,
            DedupKey::new("s@a", &rcpts(&["b@x"]), b"Message-ID: <1@a>\r\n\r\ny\r\n").fingerprint()
        );
        assert_ne!(
            fp,
            DedupKey::new("s@ab", &rcpts(&["x"]), b"Message-ID: <1@a>\r\n\r\n").fingerprint()
        );
        assert_eq!(Fnv128::new().finish(), Fnv128::OFFSET);
        let mut empty = Fnv128::new();
        empty.field(b"");
        assert_eq!(format!("{:032x}", empty.finish()), FNV_OF_EMPTY_FIELD);
        let t0 = Instant::now();
        let mut c = DedupCache::new(Duration::from_secs(60), 10);
        c.remember(fp, t0);
        assert!(c.check(&k, t0 + Duration::from_secs(1)));
    }

    /// FNV-1a 128 of eight zero bytes (the length prefix of an empty field), computed
    /// independently (Python big integers) from the published offset basis and prime.
    const FNV_OF_EMPTY_FIELD: &str = "9d30c1f78465995be47dda5e4e4e77ed";
}
