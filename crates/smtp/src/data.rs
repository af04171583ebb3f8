//! The DATA phase, both ways: dot-stuffing on send ([`dot_stuff`]) and a streaming, bounded
//! reader that undoes it on receive ([`DataReader`]).
//!
//! # End of data and bare CR / LF (RFC 5321 section 2.3.8, SMTP smuggling)
//!
//! The reader ends the message **only** at `CRLF "." CRLF` (the text start counts as following a
//! CRLF, so `"." CRLF` right after the 354 is an empty message). A bare LF or a bare CR is never a
//! line end: it is kept as a data octet and the message is marked [`DataFault::BareCrOrLf`], which
//! the server answers at the end of data with `550 5.6.2`. So `LF "." LF`, `CR "." CR`,
//! `LF "." CRLF`, `CRLF "." LF`, `CR "." CRLF`, `CRLF "." CR` and the like can neither end the
//! message early (nothing after them is ever taken for a command) nor slip into the spool as a
//! different line structure than the sender's own server saw.
//!
//! Other faults, also reported only at the end so that the reader always stays in step with the
//! client: NUL octets, lines longer than the limit, and messages larger than the limit (the reader
//! stops buffering at the limit but keeps reading to the final dot).

/// Dot-stuffs a message for sending and appends the terminating `"." CRLF`.
///
/// `body` is the message with CRLF line ends. A body that does not end in CRLF gets one, so that
/// the terminator is always `CRLF "." CRLF`. Every line that starts with "." gets one more.
pub fn dot_stuff(body: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(body.len() + body.len() / 64 + 5);
    let mut at_line_start = true;
    for &b in body {
        if at_line_start && b == b'.' {
            out.push(b'.');
        }
        out.push(b);
        at_line_start = b == b'\n';
    }
    if !body.is_empty() && !body.ends_with(b"\r\n") {
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(b".\r\n");
    out
}

/// Something wrong with a received message, known once its final dot has been read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DataFault {
    /// The message was larger than the size limit.
    TooBig,
    /// A line was longer than the line limit.
    LineTooLong,
    /// A CR not followed by LF, or an LF not preceded by CR.
    BareCrOrLf,
    /// A NUL octet.
    Nul,
}

/// Limits for one message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DataLimits {
    /// Largest message accepted, in octets after unstuffing, counting CRLFs.
    pub max_size: usize,
    /// Longest line accepted, in octets including the CRLF (RFC 5321 says 1000).
    pub max_line: usize,
}

/// Streaming reader for the text after a 354 reply.
///
/// Feed it bytes; it returns how many it consumed and whether the final dot was seen. It buffers
/// at most `max_size` octets of message plus one line of at most `max_line` octets.
#[derive(Debug)]
pub struct DataReader {
    limits: DataLimits,
    discard: bool,
    body: Vec<u8>,
    line: Vec<u8>,
    line_len: usize,
    pending_cr: bool,
    size: usize,
    faults: Vec<DataFault>,
}

impl DataReader {
    /// A reader that keeps the message (`discard == false`) or only looks for its end.
    pub fn new(limits: DataLimits, discard: bool) -> Self {
        Self {
            limits,
            discard,
            body: Vec::new(),
            line: Vec::new(),
            line_len: 0,
            pending_cr: false,
            size: 0,
            faults: Vec::new(),
        }
    }

    /// Consumes bytes from `input` up to and including the final `"." CRLF`.
    ///
    /// Returns the number of bytes consumed and `true` when the end of data was reached; the bytes
    /// after that belong to the next command.
    pub fn feed(&mut self, input: &[u8]) -> (usize, bool) {
        for (i, &b) in input.iter().enumerate() {
            if self.pending_cr {
                self.pending_cr = false;
                if b == b'\n' {
                    if self.end_line() {
                        return (i + 1, true);
                    }
                    continue;
                }
                self.fault(DataFault::BareCrOrLf);
                self.push(b'\r');
            }
            match b {
                b'\r' => self.pending_cr = true,
                b'\n' => {
                    self.fault(DataFault::BareCrOrLf);
                    self.push(b'\n');
                }
                0 => {
                    self.fault(DataFault::Nul);
                    self.push(0);
                }
                _ => self.push(b),
            }
        }
        (input.len(), false)
    }

    /// The faults seen, in the order first seen, each once.
    pub fn faults(&self) -> &[DataFault] {
        &self.faults
    }

    /// Size of the message so far (after unstuffing, counting CRLFs), even past the limit.
    pub fn size(&self) -> usize {
        self.size
    }

    /// The unstuffed message (empty when discarding or after a fault made it useless).
    pub fn into_body(self) -> Vec<u8> {
        self.body
    }

    fn fault(&mut self, fault: DataFault) {
        if !self.faults.contains(&fault) {
            self.faults.push(fault);
        }
    }

    fn push(&mut self, b: u8) {
        self.line_len = self.line_len.saturating_add(1);
        // +2 for the CRLF that the limit counts; the line buffer never grows beyond the limit.
        if self.line_len.saturating_add(2) > self.limits.max_line {
            self.fault(DataFault::LineTooLong);
        } else {
            self.line.push(b);
        }
    }

    /// Handles a CRLF; returns true if the line was the terminating ".".
    fn end_line(&mut self) -> bool {
        if self.line_len == 1 && self.line.first() == Some(&b'.') {
            return true;
        }
        let content = match self.line.first() {
            Some(b'.') => self.line.get(1..).unwrap_or(&[]),
            _ => &self.line[..],
        };
        let content_len = if self.line.first() == Some(&b'.') {
            self.line_len - 1
        } else {
            self.line_len
        };
        self.size = self.size.saturating_add(content_len).saturating_add(2);
        if self.size > self.limits.max_size && !self.faults.contains(&DataFault::TooBig) {
            self.faults.push(DataFault::TooBig);
        }
        if self.discard || !self.faults.is_empty() {
            // Nothing will be delivered: keep memory flat.
            self.body = Vec::new();
        } else {
            self.body.extend_from_slice(content);
            self.body.extend_from_slice(b"\r\n");
        }
        self.line.clear();
        self.line_len = 0;
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIMITS: DataLimits = DataLimits {
        max_size: 1 << 20,
        max_line: 1000,
    };

    fn read_all(input: &[u8]) -> (usize, bool, Vec<DataFault>, Vec<u8>) {
        let mut r = DataReader::new(LIMITS, false);
        let (n, done) = r.feed(input);
        let faults = r.faults().to_vec();
        (n, done, faults, r.into_body())
    }

    #[test]
    fn stuffing_examples() {
        assert_eq!(dot_stuff(b""), b".\r\n");
        assert_eq!(dot_stuff(b"a\r\n"), b"a\r\n.\r\n");
        assert_eq!(dot_stuff(b"a"), b"a\r\n.\r\n");
        assert_eq!(dot_stuff(b".\r\n..x\r\n"), b"..\r\n...x\r\n.\r\n");
        assert_eq!(dot_stuff(b"a\r\n.b"), b"a\r\n..b\r\n.\r\n");
    }

    #[test]
    fn unstuffs_and_stops_at_the_dot() {
        let (n, done, faults, body) = read_all(b"Subject: x\r\n\r\n..hidden\r\n.\r\nQUIT\r\n");
        assert!(done);
        assert_eq!(n, 27);
        assert!(faults.is_empty());
        assert_eq!(body, b"Subject: x\r\n\r\n.hidden\r\n");
        let (n, done, _, body) = read_all(b".\r\n");
        assert_eq!((n, done, body.len()), (3, true, 0));
    }

    /// Smuggling vectors: none of them may end the message, each marks it as faulty, and the real
    /// terminator still works.
    #[test]
    fn smuggling_vectors_never_end_the_message() {
        for vector in [
            &b"\n.\n"[..],
            b"\n.\r\n",
            b"\r\n.\n",
            b"\r.\r",
            b"\r.\r\n",
            b"\r\n.\r",
            b"\n.\r",
            b"\r.\n",
        ] {
            let mut input = b"Subject: x\r\n\r\nbody".to_vec();
            input.extend_from_slice(vector);
            input.extend_from_slice(b"MAIL FROM:<evil@example>\r\n");
            let (n, done, faults, _) = read_all(&input);
            assert!(!done, "{vector:?} ended the message");
            assert_eq!(n, input.len());
            assert_eq!(faults, vec![DataFault::BareCrOrLf], "{vector:?}");
            input.extend_from_slice(b"\r\n.\r\n");
            let (n, done, _, _) = read_all(&input);
            assert!(done && n == input.len(), "{vector:?}");
        }
    }

    #[test]
    fn limits_are_reported_at_the_end_and_memory_stays_bounded() {
        let limits = DataLimits {
            max_size: 10,
            max_line: 8,
        };
        let mut r = DataReader::new(limits, false);
        let (_, done) = r.feed(b"123456\r\n1234567\r\n.\r\n");
        assert!(done);
        assert_eq!(r.faults(), &[DataFault::LineTooLong, DataFault::TooBig]);
        assert!(r.into_body().is_empty());

        let mut r = DataReader::new(limits, false);
        let (_, done) = r.feed(b"a\0b\r\n.\r\n");
        assert!(done);
        assert_eq!(r.faults(), &[DataFault::Nul]);
    }

    #[test]
    fn a_cr_at_a_chunk_edge_is_handled() {
        let mut r = DataReader::new(LIMITS, false);
        assert_eq!(r.feed(b"x\r"), (2, false));
        assert_eq!(r.feed(b"\n.\r"), (3, false));
        assert_eq!(r.feed(b"\nrest"), (1, true));
        assert!(r.faults().is_empty());
        assert_eq!(r.into_body(), b"x\r\n");
    }
}
