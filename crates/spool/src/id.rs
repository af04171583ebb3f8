//! Queue ids: unique, sortable by arrival, safe as file names.
//!
//! An id is 24 upper-case hexadecimal digits: 10 for the arrival time in unix seconds, 8 for a
//! per-process counter and 6 for a random salt chosen when the spool is opened. Ids therefore sort
//! by arrival second (and, within one process, by order of arrival), and two gateway processes
//! that start in the same second still do not collide. The enqueuer also refuses an id that is
//! already on disk, so a collision can never overwrite a message.

use std::fmt;

/// Longest id the decoder accepts (ids written by older or foreign tools may differ in length).
pub(crate) const MAX_ID_LEN: usize = 64;

/// The identifier of one queued message; also its file name in every queue directory.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct QueueId(String);

impl QueueId {
    /// Builds a fresh id from the arrival time, a per-process counter and a per-spool salt.
    pub(crate) fn generate(arrival_unix: u64, counter: u64, salt: u32) -> Self {
        let secs = arrival_unix & 0xFF_FFFF_FFFF;
        let counter = counter & 0xFFFF_FFFF;
        let salt = salt & 0xFF_FFFF;
        QueueId(format!("{secs:010X}{counter:08X}{salt:06X}"))
    }

    /// Parses an id given by a user or found as a file name.
    ///
    /// Accepts 1 to 64 ASCII letters and digits: nothing that could name another
    /// directory or a temporary file.
    pub fn parse(s: &str) -> Result<Self, InvalidQueueId> {
        if s.is_empty() || s.len() > MAX_ID_LEN || !s.bytes().all(|b| b.is_ascii_alphanumeric()) {
            return Err(InvalidQueueId(s.chars().take(80).collect()));
        }
        Ok(QueueId(s.to_owned()))
    }

    /// The id as text (and file name).
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for QueueId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// A string that is not a valid queue id.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid queue id {0:?}: expected 1 to 64 ASCII letters and digits")]
pub struct InvalidQueueId(pub String);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_ids_sort_by_time_then_counter_and_parse_back() {
        let a = QueueId::generate(1_700_000_000, 5, 0xABCDEF);
        let b = QueueId::generate(1_700_000_000, 6, 0x000001);
        let c = QueueId::generate(1_700_000_001, 0, 0x000000);
        assert!(a < b && b < c);
        assert_eq!(a.as_str().len(), 24);
        assert_eq!(QueueId::parse(a.as_str()), Ok(a.clone()));
        assert_eq!(a.to_string(), "006553F100".to_owned() + "00000005ABCDEF");
    }

    #[test]
    fn parse_rejects_path_tricks() {
        for bad in ["", "../x", "a/b", "x.tmp", "a b", &"A".repeat(65)] {
            assert!(QueueId::parse(bad).is_err(), "{bad:?} accepted");
        }
    }
}
