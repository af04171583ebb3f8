//! Workloads: the mail a benchmark run carries, built from the compress crate's reproducible
//! corpus in the two shapes the published measurements used.
//!
//! - **Isode** ([`isode`]): whole RFC 5322 messages of an exact size (386, 1867, 14025 and
//!   135604 bytes in the paper, [`ISODE_SIZES`]), timed from submission to delivery
//!   ([`Measure::IsodeMessage`]).
//! - **NTIA** ([`ntia`]): a short covering mail carrying a plain-text file of an exact size
//!   (1024 or 51200 bytes, [`NTIA_ATTACHMENT_SIZES`]) as a 7-bit MIME part, the way 1998 mail
//!   carried text files; throughput is the attachment bits over the whole connection
//!   ([`Measure::NtiaAttachment`]).
//!
//! A workload holds one message or a run of them ([`RUN_COUNTS`]: 1, 10 and 100); every message
//! of a run is distinct (its own seed, its own `Message-ID`), so a receiver's de-duplication
//! never removes one. The envelope comes from the message's own `From:` and `To:` headers.
//!
//! Sits below the scenario runners: every scenario carries the same [`Workload`] for a given
//! seed, so scenarios are compared on identical bytes.

use skywave_compress::corpus::{
    AttachmentEncoding, MIN_MESSAGE_SIZE, message_of_size, message_with_text_attachment,
};
use thiserror::Error;

use crate::model::{Measure, Message, Workload};

pub use skywave_compress::corpus::{ISODE_SIZES, NTIA_ATTACHMENT_SIZES};

/// The run lengths of the benchmark: single messages and runs of 10 and 100.
pub const RUN_COUNTS: [usize; 3] = [1, 10, 100];

/// Most messages one workload may hold (keeps a mistyped count from eating the machine).
pub const MAX_MESSAGES: usize = 10_000;

/// Largest message or attachment size accepted, bytes.
pub const MAX_SIZE: usize = 16 * 1024 * 1024;

/// Envelope sender used when a message has no usable `From:` header.
const FALLBACK_FROM: &str = "sender@ship.example";
/// Envelope recipient used when a message has no usable `To:` header.
const FALLBACK_TO: &str = "recipient@shore.example";

/// A workload could not be built.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum WorkloadError {
    /// The message count is zero or above [`MAX_MESSAGES`].
    #[error("a workload needs between 1 and {MAX_MESSAGES} messages (asked for {0})")]
    BadCount(usize),
    /// The size is below what a realistic message can be, or above [`MAX_SIZE`].
    #[error(
        "a message size of {size} bytes is outside {min}..={MAX_SIZE} (a realistic RFC 5322 message with its headers needs at least {min} bytes)"
    )]
    BadSize {
        /// The size asked for.
        size: usize,
        /// The smallest size accepted for this shape.
        min: usize,
    },
}

/// Which shape of workload (and so which published measure) a sweep uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Shape {
    /// Whole messages of the given size ([`isode`]).
    Isode,
    /// A text attachment of the given size in a mail ([`ntia`]).
    Ntia,
}

impl Shape {
    /// The workload of this shape: `count` messages of nominal size `size`, from `seed`.
    pub fn workload(self, size: usize, count: usize, seed: u64) -> Result<Workload, WorkloadError> {
        match self {
            Shape::Isode => isode(size, count, seed),
            Shape::Ntia => ntia(size, count, seed),
        }
    }

    /// `"isode"` or `"ntia"`.
    pub fn name(self) -> &'static str {
        match self {
            Shape::Isode => "isode",
            Shape::Ntia => "ntia",
        }
    }
}

/// The seed of message `i` of a run seeded `seed` (a fixed odd multiplier spreads them).
fn message_seed(seed: u64, i: usize) -> u64 {
    seed.wrapping_mul(0x0001_0000_01B3)
        .wrapping_add((i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15))
}

fn check_count(count: usize) -> Result<(), WorkloadError> {
    if count == 0 || count > MAX_MESSAGES {
        return Err(WorkloadError::BadCount(count));
    }
    Ok(())
}

/// Isode's shape: `count` distinct messages of exactly `size` bytes each.
pub fn isode(size: usize, count: usize, seed: u64) -> Result<Workload, WorkloadError> {
    check_count(count)?;
    if !(MIN_MESSAGE_SIZE..=MAX_SIZE).contains(&size) {
        return Err(WorkloadError::BadSize {
            size,
            min: MIN_MESSAGE_SIZE,
        });
    }
    let mut messages = Vec::with_capacity(count);
    for i in 0..count {
        let body =
            message_of_size(message_seed(seed, i), size).map_err(|_| WorkloadError::BadSize {
                size,
                min: MIN_MESSAGE_SIZE,
            })?;
        messages.push(with_envelope(body));
    }
    Ok(Workload {
        messages,
        measure: Measure::IsodeMessage,
        nominal_bytes: size,
    })
}

/// NTIA's shape: `count` distinct mails, each carrying a text attachment of exactly
/// `attachment_bytes` bytes (7-bit, as the 1998 measurements sent text files).
pub fn ntia(attachment_bytes: usize, count: usize, seed: u64) -> Result<Workload, WorkloadError> {
    check_count(count)?;
    if !(1..=MAX_SIZE).contains(&attachment_bytes) {
        return Err(WorkloadError::BadSize {
            size: attachment_bytes,
            min: 1,
        });
    }
    let messages = (0..count)
        .map(|i| {
            let (body, _file) = message_with_text_attachment(
                message_seed(seed, i),
                attachment_bytes,
                AttachmentEncoding::SevenBit,
            );
            with_envelope(body)
        })
        .collect();
    Ok(Workload {
        messages,
        measure: Measure::NtiaAttachment { attachment_bytes },
        nominal_bytes: attachment_bytes,
    })
}

/// A message with its envelope taken from its `From:` and `To:` headers.
fn with_envelope(body: Vec<u8>) -> Message {
    let from = header_address(&body, "From").unwrap_or_else(|| FALLBACK_FROM.to_string());
    let to = header_address(&body, "To").unwrap_or_else(|| FALLBACK_TO.to_string());
    Message {
        from,
        to: vec![to],
        body,
    }
}

/// The header section of a message (up to the first empty line).
fn header_section(message: &[u8]) -> &[u8] {
    let end = message
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .map_or(message.len(), |p| p + 2);
    &message[..end]
}

/// The address in the first `name:` header (`Name <addr>` or a bare `addr`), if it looks like
/// one (something@something, no spaces or angle brackets).
pub fn header_address(message: &[u8], name: &str) -> Option<String> {
    let head = String::from_utf8_lossy(header_section(message)).into_owned();
    let prefix = format!("{}:", name.to_ascii_lowercase());
    let line = head
        .split("\r\n")
        .find(|l| l.to_ascii_lowercase().starts_with(&prefix))?;
    let value = line.get(prefix.len()..)?.trim();
    let addr = match (value.rfind('<'), value.rfind('>')) {
        (Some(a), Some(b)) if a < b => &value[a + 1..b],
        _ => value,
    };
    let ok = addr.contains('@')
        && !addr.starts_with('@')
        && !addr.ends_with('@')
        && !addr
            .bytes()
            .any(|b| b.is_ascii_whitespace() || b == b'<' || b == b'>' || b == b',');
    ok.then(|| addr.to_string())
}

/// The `Message-ID:` header's value of a message, if it has one.
pub fn message_id(message: &[u8]) -> Option<String> {
    let head = String::from_utf8_lossy(header_section(message)).into_owned();
    head.split("\r\n")
        .find(|l| l.to_ascii_lowercase().starts_with("message-id:"))
        .and_then(|l| l.get("message-id:".len()..))
        .map(|v| v.trim().to_string())
        .filter(|v| !v.is_empty())
}

/// Total bytes of the messages of a workload.
pub fn total_bytes(work: &Workload) -> usize {
    work.messages.iter().map(|m| m.body.len()).sum()
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use super::*;

    #[test]
    fn isode_messages_have_the_exact_size_and_distinct_message_ids() {
        for size in ISODE_SIZES {
            let w = isode(size, 10, 7).unwrap();
            assert_eq!(w.messages.len(), 10);
            assert_eq!(w.nominal_bytes, size);
            assert_eq!(w.measure, Measure::IsodeMessage);
            let mut ids = HashSet::new();
            for m in &w.messages {
                assert_eq!(m.body.len(), size);
                assert!(m.body.ends_with(b"\r\n"));
                assert!(m.from.contains('@') && m.to[0].contains('@'), "{m:?}");
                let id = message_id(&m.body).unwrap();
                assert!(id.starts_with('<') && id.ends_with('>'), "{id}");
                assert!(ids.insert(id));
            }
        }
    }

    #[test]
    fn ntia_mails_carry_the_attachment_and_are_reproducible() {
        for a in NTIA_ATTACHMENT_SIZES {
            let w = ntia(a, 3, 1).unwrap();
            assert_eq!(
                w.measure,
                Measure::NtiaAttachment {
                    attachment_bytes: a
                }
            );
            for m in &w.messages {
                assert!(m.body.len() > a);
                let text = String::from_utf8_lossy(&m.body);
                assert!(text.contains("Content-Disposition: attachment"));
                assert!(message_id(&m.body).is_some());
            }
            assert_eq!(w, ntia(a, 3, 1).unwrap());
            assert_ne!(w.messages[0].body, w.messages[1].body);
        }
    }

    #[test]
    fn bad_counts_and_sizes_are_refused() {
        assert_eq!(isode(386, 0, 1), Err(WorkloadError::BadCount(0)));
        assert!(matches!(
            isode(10, 1, 1),
            Err(WorkloadError::BadSize { size: 10, .. })
        ));
        assert!(ntia(0, 1, 1).is_err());
        assert!(ntia(1024, MAX_MESSAGES + 1, 1).is_err());
    }

    #[test]
    fn header_addresses_are_read_from_both_forms() {
        let m = b"From: Ann Example <ann@a.example>\r\nTo: bob@b.example\r\nSubject: x\r\n\r\nFrom: no@body.example\r\n";
        assert_eq!(header_address(m, "From").as_deref(), Some("ann@a.example"));
        assert_eq!(header_address(m, "to").as_deref(), Some("bob@b.example"));
        assert_eq!(header_address(m, "Cc"), None);
        assert_eq!(header_address(b"From: nobody\r\n\r\n", "From"), None);
        assert_eq!(message_id(m), None);
    }
}
