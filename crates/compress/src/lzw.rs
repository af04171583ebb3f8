//! JNOS-compatible LZW (the `XLZW` SMTP extension of the NOS family), written clean-room from the
//! stream description in `reference/hmtp-cftp-lzw.md` section 3 (no JNOS code was read).
//!
//! Used by the SMTP-over-TCP bearer towards JNOS nodes and, optionally, by compressed HMTP
//! sessions. One [`LzwEncoder`] and one [`LzwDecoder`] per direction of a session; the
//! dictionary lives as long as the session, across commands and messages, until the table fills.
//!
//! Wire format of one direction:
//! - a 2-byte header, `0x03` (version) then the sender's maxbits (9..=16), sent once;
//! - then a continuous LSB-first bit stream of codes: 0-255 literals, 256 clear (`ZCC`),
//!   257 flush (`ZFLUSH`), 258 and up dictionary entries; codes start 9 bits wide;
//! - when the table is full (the last assigned code is 2^M-2) the encoder sends the code of the
//!   character that started the new string, and then the clear code at **M+1** bits;
//! - at a flush the encoder sends its pending string and `ZFLUSH`. The transmission carries the
//!   bytes up to `ZFLUSH`'s first bit (its last byte completed by `ZFLUSH`'s low bits); the rest of
//!   `ZFLUSH` opens the next transmission, and is never sent if the connection closes first. So a
//!   decoder accepts a partial code at the end of the stream, and a flush anywhere.
//!
//! Speed (criterion, `cargo bench -p skywave-microbench --bench compress`, standard corpus, one
//! core of a quiet 2-core machine): at 12 bits 117 MiB/s to compress and 375 MiB/s to decompress,
//! against 66 and 368 MiB/s for weezl's 12-bit LSB LZW in the same run. The encoder hashes
//! (prefix, byte) pairs into an open-addressing table; the decoder copies each string from where
//! it last appeared in the output, falling back to the prefix chain for strings older than the
//! kept history.
//!
//! Sans-IO: [`LzwEncoder::push`] bytes, [`LzwEncoder::flush`] at each transmission boundary and
//! [`LzwEncoder::take_output`]; [`LzwDecoder::feed`] bytes and take the decoded text.

use crate::error::DecompressError;
use crate::limits::{Budget, Limits};

/// The version byte JNOS writes at the start of every LZW stream (`ZVERSION`).
pub const LZW_VERSION: u8 = 0x03;
/// The clear code: the decoder empties its table and returns to 9-bit codes.
pub const CLEAR_CODE: u16 = 256;
/// The flush code: ends a transmission; the decoder forgets its previous code, keeps the table.
pub const FLUSH_CODE: u16 = 257;
/// The first dictionary code.
pub const FIRST_CODE: u16 = 258;
/// Smallest maxbits JNOS accepts.
pub const MIN_MAXBITS: u8 = 9;
/// Largest maxbits JNOS accepts.
pub const MAX_MAXBITS: u8 = 16;

const INITIAL_WIDTH: u32 = 9;
const NONE: u32 = u32::MAX;

/// Clamps a configured maxbits as JNOS's `lzwinit` does: below 9 becomes 9, above 16 or 0
/// becomes 16.
pub fn clamp_maxbits(bits: u32) -> u8 {
    match bits {
        0 => MAX_MAXBITS,
        b if b < u32::from(MIN_MAXBITS) => MIN_MAXBITS,
        b if b > u32::from(MAX_MAXBITS) => MAX_MAXBITS,
        // In range 9..=16 here, so the conversion cannot fail; 16 is a harmless fallback.
        b => u8::try_from(b).unwrap_or(MAX_MAXBITS),
    }
}

/// LSB-first bit packer. Whole bytes leave the accumulator for `out` 32 bits at a time in the hot
/// path; `drain_bytes` moves the rest of the whole bytes out when the caller needs them.
#[derive(Debug, Clone)]
struct BitWriter {
    acc: u64,
    nbits: u32,
    out: Vec<u8>,
}

impl BitWriter {
    #[inline(always)]
    fn put(&mut self, code: u32, width: u32) {
        self.acc |= u64::from(code) << self.nbits;
        self.nbits += width;
        if self.nbits >= 32 {
            // Truncation to the low 32 bits is the point here.
            self.out.extend_from_slice(&(self.acc as u32).to_le_bytes());
            self.acc >>= 32;
            self.nbits -= 32;
        }
    }

    fn drain_bytes(&mut self) {
        while self.nbits >= 8 {
            self.out.push(self.acc as u8);
            self.acc >>= 8;
            self.nbits -= 8;
        }
    }

    /// Total bits written so far.
    fn bit_len(&self) -> u64 {
        self.out.len() as u64 * 8 + u64::from(self.nbits)
    }
}

/// Open-addressing hash table from (prefix code, next byte) to dictionary code. Entries pack
/// `(key + 1) << 16 | code` into a `u64`; 0 marks an empty slot. Sized at twice the largest
/// dictionary so probes stay short, and cleared in one `fill` at each table reset.
#[derive(Debug, Clone)]
struct Dict {
    slots: Vec<u64>,
    shift: u32,
    mask: usize,
}

enum Probe {
    Found(u32),
    Empty(usize),
}

impl Dict {
    fn new(maxbits: u8) -> Self {
        let bits = u32::from(maxbits) + 1;
        Dict {
            slots: vec![0; 1 << bits],
            shift: 32 - bits,
            mask: (1 << bits) - 1,
        }
    }

    #[inline(always)]
    fn probe(&self, key: u32) -> Probe {
        let tag = u64::from(key) + 1;
        let mut i = (key.wrapping_mul(0x9E37_79B1) >> self.shift) as usize;
        // At most half the slots are ever used, so an empty slot is always found; the bound
        // only keeps the loop visibly finite.
        for _ in 0..self.slots.len() {
            let e = self.slots[i];
            if e == 0 {
                return Probe::Empty(i);
            }
            if e >> 16 == tag {
                return Probe::Found((e & 0xFFFF) as u32);
            }
            i = (i + 1) & self.mask;
        }
        Probe::Empty(i)
    }

    #[inline(always)]
    fn insert_at(&mut self, slot: usize, key: u32, code: u32) {
        self.slots[slot] = ((u64::from(key) + 1) << 16) | u64::from(code);
    }

    fn clear(&mut self) {
        self.slots.fill(0);
    }
}

/// Streaming JNOS LZW encoder for one direction of a session.
///
/// Its output depends only on the bytes pushed and where [`flush`](Self::flush) was called, never
/// on how the input was cut into `push` calls.
#[derive(Debug, Clone)]
pub struct LzwEncoder {
    maxbits: u8,
    header_maxbits: u8,
    width: u32,
    next: u32,
    prefix: u32,
    dict: Dict,
    bits: BitWriter,
    /// After a flush: how many bytes of `bits.out` belong to the transmission just ended.
    cut: Option<usize>,
}

impl LzwEncoder {
    /// A new encoder with codes of at most `maxbits` bits (9..=16; use [`clamp_maxbits`] for the
    /// JNOS clamping of configured values). The 2-byte header is the first output.
    pub fn new(maxbits: u8) -> Result<Self, crate::error::SchemeError> {
        if !(MIN_MAXBITS..=MAX_MAXBITS).contains(&maxbits) {
            return Err(crate::error::SchemeError::MaxBits(u32::from(maxbits)));
        }
        Ok(LzwEncoder {
            maxbits,
            header_maxbits: maxbits,
            width: INITIAL_WIDTH,
            next: u32::from(FIRST_CODE),
            prefix: NONE,
            dict: Dict::new(maxbits),
            bits: BitWriter {
                acc: 0,
                nbits: 0,
                out: vec![LZW_VERSION, maxbits],
            },
            cut: None,
        })
    }

    /// The maxbits announced in this encoder's header.
    pub fn header_maxbits(&self) -> u8 {
        self.header_maxbits
    }

    /// The maxbits in force now (lower than the header's after [`lower_maxbits`](Self::lower_maxbits)).
    pub fn maxbits(&self) -> u8 {
        self.maxbits
    }

    fn reset_table(&mut self) {
        self.width = INITIAL_WIDTH;
        self.next = u32::from(FIRST_CODE);
        self.prefix = NONE;
        self.dict.clear();
    }

    /// Compresses `input`. Complete bytes become available to [`take_output`](Self::take_output)
    /// at once; the string in progress waits for more input or a flush.
    pub fn push(&mut self, input: &[u8]) {
        if input.is_empty() {
            return;
        }
        self.cut = None;
        let rest = input;
        let full = (1u32 << self.maxbits) - 1;
        let mut prefix = self.prefix;
        let mut next = self.next;
        let mut width = self.width;
        let mut i = 0;
        while i < rest.len() {
            let c = u32::from(rest[i]);
            i += 1;
            if prefix == NONE {
                // At the start, after a flush, or after a table reset (whose triggering
                // character is not carried over).
                prefix = c;
                continue;
            }
            let key = (prefix << 8) | c;
            match self.dict.probe(key) {
                Probe::Found(code) => prefix = code,
                Probe::Empty(slot) => {
                    self.bits.put(prefix, width);
                    self.dict.insert_at(slot, key, next);
                    next += 1;
                    prefix = c;
                    if next == 1 << width {
                        width += 1;
                    }
                    if next == full {
                        // Table full (last assigned code 2^M-2): send the character just
                        // started, widen as the decoder will after it, and clear at M+1 bits.
                        self.bits.put(prefix, width);
                        if next + 1 == 1 << width {
                            width += 1;
                        }
                        self.bits.put(u32::from(CLEAR_CODE), width);
                        self.reset_table();
                        prefix = NONE;
                        next = self.next;
                        width = self.width;
                    }
                }
            }
        }
        self.prefix = prefix;
        self.next = next;
        self.width = width;
    }

    /// Ends a transmission: sends the pending string and the flush code. The bytes up to the flush
    /// code's first bit (the last one completed by its low bits) are what
    /// [`take_output`](Self::take_output) returns next; the rest of the flush code opens the next
    /// transmission. JNOS flushes at every `usflush()`: before each read of a reply, and after
    /// every reply line on the server side.
    pub fn flush(&mut self) {
        if self.prefix != NONE {
            self.bits.put(self.prefix, self.width);
            // The decoder adds an entry for this code and widens then; follow it.
            if self.next + 1 == 1 << self.width {
                self.width += 1;
            }
            self.prefix = NONE;
        }
        let before = self.bits.bit_len();
        self.bits.put(u32::from(FLUSH_CODE), self.width);
        self.bits.drain_bytes();
        // Bytes of this transmission: ceil(bits before the flush code / 8).
        let cut = before.div_ceil(8);
        self.cut = Some(
            usize::try_from(cut)
                .unwrap_or(usize::MAX)
                .min(self.bits.out.len()),
        );
    }

    /// Lowers this encoder's maxbits to the peer's, as JNOS does on reading the peer's header.
    /// If the code width in use already exceeds the peer's maxbits (or the table is as full as the
    /// peer's maxbits allows), the pending string and a clear code are sent first.
    pub fn lower_maxbits(&mut self, peer_maxbits: u8) {
        let peer = clamp_maxbits(u32::from(peer_maxbits));
        if peer >= self.maxbits {
            return;
        }
        if self.width > u32::from(peer) || self.next + 1 >= 1 << peer {
            // A pending flush cut stays where it is: these codes open the next transmission.
            if self.prefix != NONE {
                self.bits.put(self.prefix, self.width);
                if self.next + 1 == 1 << self.width {
                    self.width += 1;
                }
            }
            self.bits.put(u32::from(CLEAR_CODE), self.width);
            self.reset_table();
        }
        self.maxbits = peer;
    }

    /// Number of bytes [`take_output`](Self::take_output) would return now.
    pub fn output_len(&self) -> usize {
        match self.cut {
            Some(cut) => cut,
            None => self.bits.out.len() + (self.bits.nbits / 8) as usize,
        }
    }

    /// Takes the compressed bytes ready to send. Right after [`flush`](Self::flush) these are
    /// exactly the transmission that the flush ended; in the middle of a transmission, every
    /// complete byte so far.
    pub fn take_output(&mut self) -> Vec<u8> {
        match self.cut.take() {
            Some(cut) => {
                let rest = self.bits.out.split_off(cut.min(self.bits.out.len()));
                std::mem::replace(&mut self.bits.out, rest)
            }
            None => {
                self.bits.drain_bytes();
                std::mem::take(&mut self.bits.out)
            }
        }
    }
}

/// One dictionary string: its last byte and prefix code (for the chain walk), its first byte and
/// length, and where in the output stream it was last seen in full (every dictionary string is
/// the previous string plus the next string's first byte, so it sits in the output at the
/// previous string's position). Decoding a code is then one copy from the recent output; the
/// chain walk is the fallback when that output is no longer kept.
#[derive(Debug, Clone, Copy)]
struct Entry {
    pos: u64,
    len: u32,
    prefix: u16,
    byte: u8,
    first: u8,
}

const EMPTY_ENTRY: Entry = Entry {
    pos: 0,
    len: 0,
    prefix: 0,
    byte: 0,
    first: 0,
};

/// Zeroed bytes kept past the output so that short strings move in one fixed-size copy.
const SLACK: usize = 16;

/// Grows the output buffer (zero-filled) to at least `need` bytes, by half again its size at
/// least, so that growth is amortised but never far above what the caps allow.
fn grow(hist: &mut Vec<u8>, need: usize) {
    let target = need.max(hist.len() + hist.len() / 2).max(65_536);
    hist.resize(target, 0);
}

/// Recent output kept by default for the copy fast path, beyond what the caller has not yet
/// taken.
pub const DEFAULT_HISTORY: usize = 256 * 1024;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum DecState {
    Version,
    MaxBits,
    Codes,
}

/// Streaming JNOS LZW decoder for one direction of a session, bounded by [`Limits`].
#[derive(Debug, Clone)]
pub struct LzwDecoder {
    state: DecState,
    maxbits: u8,
    width: u32,
    next: u32,
    prev: u32,
    /// Output position, length and first byte of the previous code's string.
    prev_pos: u64,
    prev_len: u32,
    prev_first: u8,
    table: Vec<Entry>,
    acc: u64,
    nbits: u32,
    /// Output not yet taken, preceded by up to about 2 x `history` bytes already taken, in
    /// `hist[..hist_len]`; the rest is zeroed slack so that short strings are copied in one
    /// fixed-size move.
    hist: Vec<u8>,
    hist_len: usize,
    history: usize,
    /// Stream position of `hist[0]`.
    hist_base: u64,
    /// Stream position up to which the caller has taken the output.
    taken: u64,
    budget: Budget,
    failed: Option<DecompressError>,
}

impl LzwDecoder {
    /// A decoder that expects the 2-byte header first. Its table is allocated when the header
    /// arrives, sized for the sender's maxbits.
    pub fn new(limits: Limits) -> Self {
        Self::with_history(limits, DEFAULT_HISTORY)
    }

    /// Like [`new`](Self::new), keeping `history` bytes of already-taken output so that strings
    /// are copied rather than rebuilt from the table (which is slower but needs no history). The
    /// output is the same for any value.
    pub fn with_history(limits: Limits, history: usize) -> Self {
        LzwDecoder {
            state: DecState::Version,
            maxbits: MAX_MAXBITS,
            width: INITIAL_WIDTH,
            next: u32::from(FIRST_CODE),
            prev: NONE,
            prev_pos: 0,
            prev_len: 0,
            prev_first: 0,
            table: Vec::new(),
            acc: 0,
            nbits: 0,
            hist: Vec::new(),
            hist_len: 0,
            history,
            hist_base: 0,
            taken: 0,
            budget: Budget::new(limits),
            failed: None,
        }
    }

    fn allocate_table(&mut self) {
        self.table = vec![EMPTY_ENTRY; 1 << self.maxbits];
        for (i, e) in self.table.iter_mut().enumerate().take(256) {
            let b = i as u8;
            *e = Entry {
                pos: 0,
                len: 1,
                prefix: 0,
                byte: b,
                first: b,
            };
        }
    }

    /// The peer's maxbits, once its header has arrived.
    pub fn peer_maxbits(&self) -> Option<u8> {
        (self.state == DecState::Codes).then_some(self.maxbits)
    }

    /// Starts a new message for the per-message cap.
    pub fn start_message(&mut self) {
        self.budget.start_message();
    }

    /// Total bytes decoded over the stream's life.
    pub fn total_out(&self) -> u64 {
        self.budget.stream_total()
    }

    /// Decodes `input`, appending the text to the output buffer. An error is final: every later
    /// call returns it again.
    pub fn feed(&mut self, input: &[u8]) -> Result<(), DecompressError> {
        if let Some(e) = &self.failed {
            return Err(e.clone());
        }
        let result = self.feed_inner(input);
        if let Err(e) = &result {
            self.failed = Some(e.clone());
        }
        result
    }

    fn feed_inner(&mut self, input: &[u8]) -> Result<(), DecompressError> {
        let mut rest = input;
        while self.state != DecState::Codes {
            let Some((&b, tail)) = rest.split_first() else {
                return Ok(());
            };
            rest = tail;
            match self.state {
                DecState::Version => {
                    if b != LZW_VERSION {
                        return Err(DecompressError::LzwVersion(b));
                    }
                    self.state = DecState::MaxBits;
                }
                DecState::MaxBits => {
                    if !(MIN_MAXBITS..=MAX_MAXBITS).contains(&b) {
                        return Err(DecompressError::LzwMaxBits(b));
                    }
                    self.maxbits = b;
                    self.allocate_table();
                    self.state = DecState::Codes;
                }
                DecState::Codes => {}
            }
        }
        self.decode(rest)
    }

    /// The hot loop. State lives in locals (the compiler cannot keep fields in registers across
    /// writes to the output vector) and the caps are checked against a per-call allowance.
    fn decode(&mut self, input: &[u8]) -> Result<(), DecompressError> {
        let mut acc = self.acc;
        let mut nbits = self.nbits;
        let mut width = self.width;
        let mut next = self.next;
        let mut prev = self.prev;
        let mut prev_pos = self.prev_pos;
        // Length and first byte of the previous string, so the new entry needs no table read.
        let mut prev_len = self.prev_len;
        let mut prev_first = self.prev_first;
        let hist_base = self.hist_base;
        let allowance = self.budget.remaining();
        let mut produced: u64 = 0;
        // Highest entry index the sender may assign: 2^M - 2.
        let last_entry = (1u32 << self.maxbits) - 2;
        let table = &mut self.table[..];
        let hist = &mut self.hist;
        let mut cur = self.hist_len;
        let mut error = None;
        let mut i = 0;
        'refill: loop {
            if nbits <= 32
                && let Some(word) = input.get(i..i + 4)
            {
                let mut w = [0u8; 4];
                w.copy_from_slice(word);
                acc |= u64::from(u32::from_le_bytes(w)) << nbits;
                nbits += 32;
                i += 4;
            } else {
                while nbits <= 56 && i < input.len() {
                    acc |= u64::from(input[i]) << nbits;
                    nbits += 8;
                    i += 1;
                }
            }
            while nbits >= width {
                let code = (acc & ((1u64 << width) - 1)) as u32;
                acc >>= width;
                nbits -= width;
                if code >= u32::from(CLEAR_CODE) {
                    if code <= u32::from(FLUSH_CODE) {
                        if code == u32::from(CLEAR_CODE) {
                            width = INITIAL_WIDTH;
                            next = u32::from(FIRST_CODE);
                        }
                        // Both forget the previous string; a flush keeps table and width.
                        prev = NONE;
                        continue;
                    }
                    if code > next || (prev == NONE && code == next) {
                        // A code not yet in the table; with no previous string even the
                        // "code == next" case cannot apply.
                        error = Some(DecompressError::LzwCodeOutOfRange { code, next });
                        break 'refill;
                    }
                }
                let at = hist_base + cur as u64;
                let kwkwk = code == next;
                if prev != NONE {
                    if next > last_entry {
                        error = Some(DecompressError::LzwTableOverflow {
                            maxbits: self.maxbits,
                        });
                        break 'refill;
                    }
                    let first = if kwkwk {
                        prev_first
                    } else {
                        table[code as usize].first
                    };
                    table[next as usize] = Entry {
                        pos: prev_pos,
                        len: prev_len + 1,
                        prefix: prev as u16,
                        byte: first,
                        first: prev_first,
                    };
                    next += 1;
                }
                let e = table[code as usize];
                let len = u64::from(e.len);
                if produced + len > allowance {
                    // Account for what was written, then let the budget name the cap hit.
                    let _ = self.budget.take(produced);
                    produced = 0;
                    error = Some(self.budget.take(len).err().unwrap_or(
                        DecompressError::LimitExceeded {
                            kind: crate::error::LimitKind::Stream,
                            limit: allowance,
                        },
                    ));
                    break 'refill;
                }
                produced += len;
                let n = e.len as usize;
                if cur + n + SLACK > hist.len() {
                    grow(hist, cur + n + SLACK);
                }
                if n == 1 {
                    hist[cur] = e.byte;
                    cur += 1;
                } else if e.pos >= hist_base {
                    let start = (e.pos - hist_base) as usize;
                    // The KwKwK entry's last byte is its own first byte, not yet written.
                    let copy = n - usize::from(kwkwk);
                    if copy <= SLACK {
                        // A fixed-size move compiles to a couple of loads and stores; the bytes
                        // past `copy` are overwritten later. Source and destination may overlap
                        // only in the KwKwK case, where the move semantics keep it right.
                        hist.copy_within(start..start + SLACK, cur);
                    } else {
                        hist.copy_within(start..start + copy, cur);
                    }
                    cur += copy;
                    if kwkwk {
                        hist[cur] = e.first;
                        cur += 1;
                    }
                } else {
                    walk(table, &mut hist[cur..cur + n], code);
                    cur += n;
                }
                prev = code;
                prev_pos = at;
                prev_len = e.len;
                prev_first = e.first;
                if next + 1 == 1 << width {
                    width += 1;
                }
            }
            if i >= input.len() {
                break;
            }
        }
        self.acc = acc;
        self.nbits = nbits;
        self.width = width;
        self.next = next;
        self.prev = prev;
        self.prev_pos = prev_pos;
        self.prev_len = prev_len;
        self.prev_first = prev_first;
        self.hist_len = cur;
        if let Some(e) = error {
            if produced > 0 {
                let _ = self.budget.take(produced);
            }
            return Err(e);
        }
        self.budget.take(produced)
    }

    /// Ends the stream. A partial code at the end is accepted (JNOS never sends the rest of the
    /// last flush code); a stream cut inside its 2-byte header is an error.
    pub fn finish(&mut self) -> Result<(), DecompressError> {
        if let Some(e) = &self.failed {
            return Err(e.clone());
        }
        if self.state == DecState::MaxBits {
            return Err(DecompressError::LzwTruncatedHeader);
        }
        Ok(())
    }

    /// Bytes of decoded text waiting in the output buffer.
    pub fn output_len(&self) -> usize {
        (self.hist_base + self.hist_len as u64 - self.taken) as usize
    }

    /// Takes the decoded text so far.
    pub fn take_output(&mut self) -> Vec<u8> {
        let from = (self.taken - self.hist_base) as usize;
        let out = self.hist[from..self.hist_len].to_vec();
        self.taken = self.hist_base + self.hist_len as u64;
        // Keep the most recent `history` bytes for the copy fast path; drop older taken bytes
        // once there are twice that many, so the move is amortised.
        if self.hist_len > 2 * self.history {
            let drop = self.hist_len - self.history;
            self.hist.copy_within(drop..self.hist_len, 0);
            self.hist_len -= drop;
            self.hist_base += drop as u64;
            // Give back memory a burst of output left behind.
            let want = (self.hist_len + 65_536).max(2 * self.history + 65_536);
            if self.hist.len() > 2 * want {
                self.hist.truncate(want);
                self.hist.shrink_to_fit();
            }
        }
        out
    }
}

/// Rebuilds a string from its prefix chain, last byte first, when its last full appearance is no
/// longer in the kept output. Prefixes are always lower codes and `len` counts the chain exactly,
/// so this touches each byte once.
fn walk(table: &[Entry], buf: &mut [u8], code: u32) {
    let mut c = code as usize;
    if let Some((head, tail)) = buf.split_first_mut() {
        for slot in tail.iter_mut().rev() {
            let entry = table[c];
            *slot = entry.byte;
            c = usize::from(entry.prefix);
        }
        *head = table[c].byte;
    }
}

/// Both directions of a JNOS LZW session: the encoder lowers its maxbits to the peer's as soon as
/// the peer's header arrives, as JNOS does. The two directions otherwise keep independent state.
#[derive(Debug, Clone)]
pub struct LzwSession {
    /// Our direction.
    pub encoder: LzwEncoder,
    /// The peer's direction.
    pub decoder: LzwDecoder,
    lowered: bool,
}

impl LzwSession {
    /// A session that sends with `maxbits` and decodes within `limits`.
    pub fn new(maxbits: u8, limits: Limits) -> Result<Self, crate::error::SchemeError> {
        Ok(LzwSession {
            encoder: LzwEncoder::new(maxbits)?,
            decoder: LzwDecoder::new(limits),
            lowered: false,
        })
    }

    /// Decodes bytes from the peer; on its header, lowers our encoder's maxbits if the peer's
    /// is smaller.
    pub fn receive(&mut self, input: &[u8]) -> Result<(), DecompressError> {
        self.decoder.feed(input)?;
        if !self.lowered
            && let Some(peer) = self.decoder.peer_maxbits()
        {
            self.encoder.lower_maxbits(peer);
            self.lowered = true;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(s: &str) -> Vec<u8> {
        s.split_whitespace()
            .map(|h| u8::from_str_radix(h, 16).unwrap())
            .collect()
    }

    fn decode_all(stream: &[u8]) -> Vec<u8> {
        let mut d = LzwDecoder::new(Limits::default());
        d.feed(stream).unwrap();
        d.finish().unwrap();
        d.take_output()
    }

    /// Reference section 3.3, vector 1.
    #[test]
    fn vector_tobeornot_12_bits() {
        let mut e = LzwEncoder::new(12).unwrap();
        e.push(b"TOBEORNOTTOBEORTOBEORNOT");
        e.flush();
        let out = e.take_output();
        assert_eq!(
            out,
            hex("03 0c 54 9e 08 29 f2 44 8a 93 27 54 04 12 34 b8 b0 e0 c1 84")
        );
        assert_eq!(decode_all(&out), b"TOBEORNOTTOBEORTOBEORNOT");
    }

    /// Reference section 3.3, vector 2 (KwKwK case).
    #[test]
    fn vector_aaaa_16_bits() {
        let mut e = LzwEncoder::new(16).unwrap();
        e.push(b"aaaaaaaaaa");
        e.flush();
        let out = e.take_output();
        assert_eq!(out, hex("03 10 61 04 0e 24 18"));
        assert_eq!(decode_all(&out), b"aaaaaaaaaa");
    }

    /// Reference section 3.3, vector 3: two transmissions, the second opening with the rest of
    /// the first's flush code, and 7 bits of the last flush code never sent.
    #[test]
    fn vector_two_transmissions_9_bits() {
        let mut e = LzwEncoder::new(9).unwrap();
        e.push(b"HELO a\r\n");
        e.flush();
        let t1 = e.take_output();
        assert_eq!(t1, hex("03 09 48 8a 30 79 02 22 4c 03 05"));
        e.push(b"QUIT\r\n");
        e.flush();
        let t2 = e.take_output();
        assert_eq!(t2, hex("01 a3 54 49 42 05 61"));

        let mut d = LzwDecoder::new(Limits::default());
        d.feed(&t1).unwrap();
        assert_eq!(d.take_output(), b"HELO a\r\n");
        d.feed(&t2).unwrap();
        d.finish().unwrap();
        assert_eq!(d.take_output(), b"QUIT\r\n");
    }

    #[test]
    fn output_independent_of_chunking() {
        let text: Vec<u8> = (0..20_000u32)
            .map(|i| b"the quick brown fox "[(i * 7 % 20) as usize] ^ (i % 3) as u8)
            .collect();
        for bits in [9u8, 12, 16] {
            let mut whole = LzwEncoder::new(bits).unwrap();
            whole.push(&text);
            whole.flush();
            let a = whole.take_output();
            let mut bytewise = LzwEncoder::new(bits).unwrap();
            let mut b = Vec::new();
            for (i, ch) in text.iter().enumerate() {
                bytewise.push(std::slice::from_ref(ch));
                if i % 1000 == 0 {
                    b.extend(bytewise.take_output());
                }
            }
            bytewise.flush();
            b.extend(bytewise.take_output());
            assert_eq!(a, b, "maxbits {bits}");
            assert_eq!(decode_all(&a), text);
        }
    }

    /// Random data fills the 9-bit table quickly: the clear code goes out at 10 bits and the
    /// decoder follows through many resets.
    #[test]
    fn table_full_resets_round_trip() {
        let data = crate::corpus::noise(12345, 200_000);
        for bits in 9..=16u8 {
            let mut e = LzwEncoder::new(bits).unwrap();
            let mut resets = 0;
            for piece in data.chunks(1000) {
                let before = e.next;
                e.push(piece);
                if e.next < before {
                    resets += 1;
                }
            }
            // Even the 16-bit table (65277 entries) fills at least once.
            assert!(resets >= 1, "maxbits {bits}");
            e.flush();
            assert_eq!(decode_all(&e.take_output()), data, "maxbits {bits}");
        }
    }

    /// A clear code sent at M bits instead of M+1 (the mistake the reference warns about) must
    /// not decode to the original text.
    #[test]
    fn clear_code_width_is_m_plus_one() {
        // Distinct pairs so that every code adds an entry: 9-bit table fills after 253 codes.
        let mut e = LzwEncoder::new(9).unwrap();
        let data: Vec<u8> = (0..600u32).map(|i| (i * 97 % 251) as u8).collect();
        e.push(&data);
        e.flush();
        let out = e.take_output();
        // Find the clear code in the bit stream: codes are 9 bits until the table-full point,
        // where the character code is 9 bits and the clear code 10 bits.
        let bit = |pos: usize| (out[2 + pos / 8] >> (pos % 8)) & 1;
        let read =
            |pos: usize, w: usize| (0..w).fold(0u32, |a, i| a | (u32::from(bit(pos + i)) << i));
        let mut pos = 0;
        let mut codes = 0;
        loop {
            let c = read(pos, 9);
            pos += 9;
            codes += 1;
            if codes == 254 {
                // The character that followed the last entry, then the clear code at 10 bits.
                assert_eq!(read(pos, 10), u32::from(CLEAR_CODE));
                break;
            }
            assert!(c < 512 && codes < 254);
        }
        assert_eq!(decode_all(&out), data);
    }

    /// Strings whose last full appearance has left the kept history are rebuilt from the table:
    /// the output is the same whatever the history size.
    #[test]
    fn history_size_does_not_change_output() {
        let mut text = Vec::new();
        let mut x: u32 = 7;
        while text.len() < 400_000 {
            x = x.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
            let words: [&[u8]; 6] = [b"radio ", b"mail ", b"ship ", b"harbour ", b"\r\n", b"HF "];
            text.extend_from_slice(words[(x >> 24) as usize % 6]);
        }
        let mut e = LzwEncoder::new(16).unwrap();
        e.push(&text);
        e.flush();
        let wire = e.take_output();
        for history in [0, 1, 100, 5000, DEFAULT_HISTORY] {
            let mut d = LzwDecoder::with_history(Limits::default(), history);
            let mut got = Vec::new();
            for piece in wire.chunks(333) {
                d.feed(piece).unwrap();
                got.extend(d.take_output());
            }
            assert_eq!(got, text, "history {history}");
        }
    }

    #[test]
    fn lowering_maxbits_to_the_peer() {
        // Nothing sent yet: just lower.
        let mut e = LzwEncoder::new(16).unwrap();
        e.lower_maxbits(9);
        assert_eq!(e.maxbits(), 9);
        assert_eq!(e.header_maxbits(), 16);
        // Width already above the peer's: pending string and a clear code go out first.
        let mut e = LzwEncoder::new(16).unwrap();
        let mut x: u32 = 99;
        let text: Vec<u8> = (0..12_000)
            .map(|_| {
                x = x.wrapping_mul(1_103_515_245).wrapping_add(12345);
                (x >> 16) as u8
            })
            .collect();
        e.push(&text);
        assert!(e.width > 12);
        e.lower_maxbits(12);
        e.push(&text);
        e.flush();
        let out = e.take_output();
        let mut want = text.clone();
        want.extend_from_slice(&text);
        assert_eq!(decode_all(&out), want);
    }

    /// Lowering right after a flush leaves the ended transmission as it was; the clear code
    /// opens the next one.
    #[test]
    fn lowering_after_flush_keeps_the_cut() {
        let text: Vec<u8> = (0..9000u32).map(|i| (i * i % 251) as u8).collect();
        let mut plain = LzwEncoder::new(16).unwrap();
        plain.push(&text);
        plain.flush();
        let t1 = plain.take_output();
        let mut lowered = LzwEncoder::new(16).unwrap();
        lowered.push(&text);
        lowered.flush();
        lowered.lower_maxbits(10);
        assert_eq!(lowered.take_output(), t1);
        lowered.push(b"QUIT\r\n");
        lowered.flush();
        let mut stream = t1;
        stream.extend(lowered.take_output());
        let mut want = text.clone();
        want.extend_from_slice(b"QUIT\r\n");
        assert_eq!(decode_all(&stream), want);
    }

    #[test]
    fn session_lowers_on_peer_header() {
        let mut ours = LzwSession::new(16, Limits::default()).unwrap();
        let mut peer = LzwEncoder::new(10).unwrap();
        peer.push(b"220 jnos SMTP ready\r\n");
        peer.flush();
        ours.receive(&peer.take_output()).unwrap();
        assert_eq!(ours.decoder.take_output(), b"220 jnos SMTP ready\r\n");
        assert_eq!(ours.encoder.maxbits(), 10);
    }

    #[test]
    fn flush_anywhere_and_partial_code_at_end() {
        let text = b"MAIL FROM:<a@b>\r\nRCPT TO:<c@d>\r\nDATA\r\n";
        let mut e = LzwEncoder::new(12).unwrap();
        let mut stream = Vec::new();
        for piece in text.chunks(5) {
            e.push(piece);
            e.flush();
            e.flush();
            stream.extend(e.take_output());
        }
        assert_eq!(decode_all(&stream), text);
        // Any number of trailing bits short of a code is accepted.
        let mut d = LzwDecoder::new(Limits::default());
        d.feed(&stream[..stream.len() - 1]).unwrap();
        d.finish().unwrap();
    }

    #[test]
    fn bad_headers_and_codes_are_errors() {
        let mut d = LzwDecoder::new(Limits::default());
        assert_eq!(d.feed(&[0x04, 9]), Err(DecompressError::LzwVersion(4)));
        let mut d = LzwDecoder::new(Limits::default());
        assert_eq!(d.feed(&[0x03, 17]), Err(DecompressError::LzwMaxBits(17)));
        let mut d = LzwDecoder::new(Limits::default());
        d.feed(&[0x03]).unwrap();
        assert_eq!(d.finish(), Err(DecompressError::LzwTruncatedHeader));
        // First code 300 with an empty table.
        let mut d = LzwDecoder::new(Limits::default());
        let code: u16 = 300;
        let r = d.feed(&[0x03, 9, code as u8, (code >> 8) as u8]);
        assert!(matches!(r, Err(DecompressError::LzwCodeOutOfRange { .. })));
        // The error sticks.
        assert!(d.feed(b"x").is_err());
    }

    #[test]
    fn table_overflow_without_clear_is_an_error() {
        // A 9-bit stream that keeps adding entries past 510 without a clear code.
        let mut bits = BitWriter {
            acc: 0,
            nbits: 0,
            out: vec![LZW_VERSION, 9],
        };
        for i in 0..400u32 {
            bits.put(i % 200, if i < 254 { 9 } else { 10 });
        }
        bits.drain_bytes();
        let mut d = LzwDecoder::new(Limits::default());
        assert_eq!(
            d.feed(&bits.out),
            Err(DecompressError::LzwTableOverflow { maxbits: 9 })
        );
    }

    /// A few hundred bytes of 16-bit KwKwK codes would expand quadratically; the cap stops it.
    #[test]
    fn bomb_stops_at_the_cap() {
        let mut e = LzwEncoder::new(16).unwrap();
        let zeros = vec![0u8; 4 << 20];
        e.push(&zeros);
        e.flush();
        let bomb = e.take_output();
        assert!(bomb.len() < 8000, "{}", bomb.len());
        let mut d = LzwDecoder::new(Limits::single(1 << 20));
        let r = d.feed(&bomb);
        assert_eq!(
            r,
            Err(DecompressError::LimitExceeded {
                kind: crate::error::LimitKind::Stream,
                limit: 1 << 20
            })
        );
        assert!(d.output_len() <= 1 << 20);
        // Per-message cap, reset between messages.
        let mut d = LzwDecoder::new(Limits {
            max_stream_bytes: u64::MAX,
            max_message_bytes: 3 << 20,
        });
        let half = bomb.len() / 2;
        d.feed(&bomb[..half]).unwrap();
        d.start_message();
        assert!(d.feed(&bomb[half..]).is_ok());
    }
}
