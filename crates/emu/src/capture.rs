//! pcap capture of the D_PDUs the emulated nodes put on the air, for Wireshark's `s5066dts`
//! dissector. Sits beside [`crate::net`], which hands it every D_PDU as it is encoded.
//!
//! Encapsulation: classic pcap with link type 237 (`LINKTYPE_STANAG_5066_D_PDU`), one D_PDU
//! per record, starting with its 0x90 0xEB sync. Wireshark maps that link type to its
//! `WTAP_ENCAP_STANAG_5066_D_PDU`, on which `s5066dts` is registered, so `tshark -r` decodes
//! the file with no preference set. (The dissector's other entry, TCP on a configured port, is
//! for DTS-over-TCP links and is not used here.) Caveat of the dissector, not of the bytes:
//! it ignores any record shorter than 15 bytes, its minimal header length, so an ACK-ONLY
//! between two small addresses (e.g. 0.0.0.1 and 0.0.0.2: 10 bytes) shows up undecoded.
//!
//! Timestamps are simulated time plus a caller-chosen epoch (zero: the capture starts on
//! 1 January 1970), taken at the start of the interleaver block carrying the D_PDU's first
//! byte. The sending node is the D_PDU's source address. Every D_PDU put on the air is
//! recorded, including those that collided or that the addressee lost.
//!
//! The pcap format itself is written by [`skywave_sis::pcap::PcapWriter`], shared with the SIS
//! captures.

use std::fmt;
use std::io::{self, Write};
use std::time::Duration;

use skywave_sis::pcap::{LINKTYPE_STANAG_5066_D_PDU, PcapWriter};

/// A pcap file of D_PDUs being written.
pub struct DpduCapture {
    writer: PcapWriter<Box<dyn Write + Send>>,
    epoch: Duration,
    records: u64,
    error: Option<io::Error>,
}

impl fmt::Debug for DpduCapture {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DpduCapture")
            .field("epoch", &self.epoch)
            .field("records", &self.records)
            .field("error", &self.error)
            .finish_non_exhaustive()
    }
}

impl DpduCapture {
    /// Writes the pcap header to `out`; records will be stamped `epoch` + simulated time.
    pub fn new<W: Write + Send + 'static>(out: W, epoch: Duration) -> io::Result<Self> {
        let writer = PcapWriter::with_link_type(
            Box::new(out) as Box<dyn Write + Send>,
            LINKTYPE_STANAG_5066_D_PDU,
        )?;
        Ok(DpduCapture {
            writer,
            epoch,
            records: 0,
            error: None,
        })
    }

    /// Records one D_PDU sent at simulated time `at`. After a write error the capture stops
    /// recording and keeps the error for [`Self::finish`] (the simulation goes on).
    pub fn record(&mut self, at: Duration, dpdu: &[u8]) {
        if self.error.is_some() {
            return;
        }
        match self.writer.write_frame(self.epoch + at, dpdu) {
            Ok(()) => self.records += 1,
            Err(e) => {
                tracing::error!("D_PDU capture stopped: cannot write: {e}");
                self.error = Some(e);
            }
        }
    }

    /// D_PDUs recorded so far.
    pub fn records(&self) -> u64 {
        self.records
    }

    /// Flushes the file; the number of D_PDUs recorded, or the first write error.
    pub fn finish(mut self) -> io::Result<u64> {
        if let Some(e) = self.error.take() {
            return Err(e);
        }
        self.writer.flush()?;
        Ok(self.records)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};

    #[derive(Clone, Default)]
    struct Shared(Arc<Mutex<Vec<u8>>>);

    impl Write for Shared {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    /// Accepts `0` more bytes, then fails.
    struct FailAfter(usize);

    impl Write for FailAfter {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            if buf.len() > self.0 {
                return Err(io::Error::other("disk full"));
            }
            self.0 -= buf.len();
            Ok(buf.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn header_and_records_are_libpcap_with_link_type_237() {
        let out = Shared::default();
        let mut c = DpduCapture::new(out.clone(), Duration::from_secs(1_000)).unwrap();
        // The Annex C reference D_PDU (a WARNING) from crate::crc's vector.
        let d = [
            0x90, 0xEB, 0xF0, 0x00, 0x00, 0x47, 0x05, 0x64, 0x02, 0x5F, 0x1E,
        ];
        c.record(Duration::from_millis(2_500), &d);
        assert_eq!(c.records(), 1);
        assert_eq!(c.finish().unwrap(), 1);
        let b = out.0.lock().unwrap().clone();
        assert_eq!(&b[..4], &[0xD4, 0xC3, 0xB2, 0xA1]);
        assert_eq!(u32::from_le_bytes(b[20..24].try_into().unwrap()), 237);
        assert_eq!(u32::from_le_bytes(b[24..28].try_into().unwrap()), 1_002);
        assert_eq!(u32::from_le_bytes(b[28..32].try_into().unwrap()), 500_000);
        assert_eq!(u32::from_le_bytes(b[32..36].try_into().unwrap()), 11);
        assert_eq!(&b[40..], &d);
    }

    #[test]
    fn a_write_error_stops_the_capture_and_is_reported() {
        assert!(DpduCapture::new(FailAfter(10), Duration::ZERO).is_err());
        // Header (24) + one record (16 + 2) fit; the second record does not.
        let mut c = DpduCapture::new(FailAfter(24 + 18), Duration::ZERO).unwrap();
        c.record(Duration::ZERO, &[0x90, 0xEB]);
        assert_eq!(c.records(), 1);
        c.record(Duration::ZERO, &[0x90, 0xEB]);
        c.record(Duration::ZERO, &[0x90, 0xEB]);
        assert_eq!(c.records(), 1, "{c:?}");
        assert!(c.finish().is_err());
    }
}
