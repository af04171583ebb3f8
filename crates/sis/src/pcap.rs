//! A classic libpcap writer for TCP conversations carrying SIS bytes, so that Wireshark's
//! `s5066sis` dissector (registered on TCP port 5066) can decode captured traffic.
//!
//! It synthesises Ethernet, IPv4 and TCP headers (with correct sequence numbers and valid
//! checksums) around the bytes each side sent. It does no I/O of its own beyond the
//! [`std::io::Write`] it is given and takes timestamps as arguments, so both the client (through
//! [`crate::client::PcapCapture`]) and the emulator can use it. The writer itself is link-type
//! generic: the emulator also uses it for captures of bare D_PDUs
//! ([`LINKTYPE_STANAG_5066_D_PDU`]), and the gateway for UDP datagrams as raw IP packets
//! ([`LINKTYPE_RAW`], [`ip_udp_packet`]: its P_MUL over IP).

use std::io::{self, Write};
use std::net::{IpAddr, SocketAddr, SocketAddrV4};
use std::time::Duration;

/// The SIS server port registered with IANA (and in Wireshark's dissector).
pub const SIS_PORT: u16 = 5066;
/// Largest TCP payload put in one synthesised segment (Ethernet MSS).
pub const MSS: usize = 1460;

/// Link type of Ethernet frames (what [`PcapWriter::new`] writes).
pub const LINKTYPE_ETHERNET: u32 = 1;
/// Link type of raw IP packets, IPv4 or IPv6 by the version nibble ([`ip_udp_packet`]).
pub const LINKTYPE_RAW: u32 = 101;
/// Link type of bare STANAG 5066 D_PDUs, one per record (Wireshark's `s5066dts` dissector).
pub const LINKTYPE_STANAG_5066_D_PDU: u32 = 237;
const SNAPLEN: u32 = 65_535;

/// Writes pcap records to `W`.
#[derive(Debug)]
pub struct PcapWriter<W: Write> {
    out: W,
}

impl<W: Write> PcapWriter<W> {
    /// Writes the pcap global header (microsecond timestamps, Ethernet link type).
    pub fn new(out: W) -> io::Result<Self> {
        Self::with_link_type(out, LINKTYPE_ETHERNET)
    }

    /// Writes the pcap global header for another link type (e.g.
    /// [`LINKTYPE_STANAG_5066_D_PDU`]); records are then written with [`Self::write_frame`].
    pub fn with_link_type(mut out: W, link_type: u32) -> io::Result<Self> {
        let mut h = Vec::with_capacity(24);
        h.extend_from_slice(&0xA1B2_C3D4u32.to_le_bytes());
        h.extend_from_slice(&2u16.to_le_bytes());
        h.extend_from_slice(&4u16.to_le_bytes());
        h.extend_from_slice(&0i32.to_le_bytes());
        h.extend_from_slice(&0u32.to_le_bytes());
        h.extend_from_slice(&SNAPLEN.to_le_bytes());
        h.extend_from_slice(&link_type.to_le_bytes());
        out.write_all(&h)?;
        Ok(PcapWriter { out })
    }

    /// Writes one link-layer frame with timestamp `ts` (since the Unix epoch).
    pub fn write_frame(&mut self, ts: Duration, frame: &[u8]) -> io::Result<()> {
        let len = u32::try_from(frame.len())
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "frame too large for pcap"))?;
        let secs = u32::try_from(ts.as_secs()).unwrap_or(u32::MAX);
        let mut h = Vec::with_capacity(16);
        h.extend_from_slice(&secs.to_le_bytes());
        h.extend_from_slice(&ts.subsec_micros().to_le_bytes());
        h.extend_from_slice(&len.to_le_bytes());
        h.extend_from_slice(&len.to_le_bytes());
        self.out.write_all(&h)?;
        self.out.write_all(frame)
    }

    /// Flushes the underlying writer.
    pub fn flush(&mut self) -> io::Result<()> {
        self.out.flush()
    }

    /// The underlying writer.
    pub fn get_ref(&self) -> &W {
        &self.out
    }

    /// Gives back the underlying writer.
    pub fn into_inner(self) -> W {
        self.out
    }
}

/// Which side sent a segment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    /// From the client (the side that connected) to the server.
    ClientToServer,
    /// From the server to the client.
    ServerToClient,
}

const SYN: u8 = 0x02;
const ACK: u8 = 0x10;
const PSH: u8 = 0x08;
const FIN: u8 = 0x01;

/// One TCP connection's state: endpoints and next sequence numbers.
#[derive(Debug, Clone)]
pub struct TcpFlow {
    client: SocketAddrV4,
    server: SocketAddrV4,
    client_seq: u32,
    server_seq: u32,
    ip_id: u16,
}

impl TcpFlow {
    /// A flow between `client` and `server` (initial sequence numbers are fixed so captures
    /// are reproducible).
    pub fn new(client: SocketAddrV4, server: SocketAddrV4) -> Self {
        TcpFlow {
            client,
            server,
            client_seq: 1_000,
            server_seq: 500_000,
            ip_id: 1,
        }
    }

    /// Writes the three-way handshake (SYN, SYN-ACK, ACK).
    pub fn handshake<W: Write>(&mut self, w: &mut PcapWriter<W>, ts: Duration) -> io::Result<()> {
        self.segment(w, ts, Direction::ClientToServer, SYN, &[])?;
        self.client_seq = self.client_seq.wrapping_add(1);
        self.segment(w, ts, Direction::ServerToClient, SYN | ACK, &[])?;
        self.server_seq = self.server_seq.wrapping_add(1);
        self.segment(w, ts, Direction::ClientToServer, ACK, &[])
    }

    /// Writes `payload` sent in direction `dir`, cut into segments of at most [`MSS`] bytes.
    pub fn data<W: Write>(
        &mut self,
        w: &mut PcapWriter<W>,
        ts: Duration,
        dir: Direction,
        payload: &[u8],
    ) -> io::Result<()> {
        for chunk in payload.chunks(MSS) {
            self.segment(w, ts, dir, PSH | ACK, chunk)?;
            let len = chunk.len() as u32; // at most MSS
            match dir {
                Direction::ClientToServer => self.client_seq = self.client_seq.wrapping_add(len),
                Direction::ServerToClient => self.server_seq = self.server_seq.wrapping_add(len),
            }
        }
        Ok(())
    }

    /// Writes a FIN from `dir`'s sender.
    pub fn fin<W: Write>(
        &mut self,
        w: &mut PcapWriter<W>,
        ts: Duration,
        dir: Direction,
    ) -> io::Result<()> {
        self.segment(w, ts, dir, FIN | ACK, &[])?;
        match dir {
            Direction::ClientToServer => self.client_seq = self.client_seq.wrapping_add(1),
            Direction::ServerToClient => self.server_seq = self.server_seq.wrapping_add(1),
        }
        Ok(())
    }

    fn segment<W: Write>(
        &mut self,
        w: &mut PcapWriter<W>,
        ts: Duration,
        dir: Direction,
        flags: u8,
        payload: &[u8],
    ) -> io::Result<()> {
        let (src, dst, seq, ack) = match dir {
            Direction::ClientToServer => {
                (self.client, self.server, self.client_seq, self.server_seq)
            }
            Direction::ServerToClient => {
                (self.server, self.client, self.server_seq, self.client_seq)
            }
        };
        let ack = if flags & ACK != 0 { ack } else { 0 };
        self.ip_id = self.ip_id.wrapping_add(1);
        let frame = build_frame(src, dst, seq, ack, flags, self.ip_id, payload);
        w.write_frame(ts, &frame)
    }
}

fn mac(addr: &SocketAddrV4) -> [u8; 6] {
    let o = addr.ip().octets();
    [0x02, 0x00, o[0], o[1], o[2], o[3]]
}

/// Internet checksum (RFC 1071) over `data`, starting from `sum`.
fn checksum(mut sum: u32, data: &[u8]) -> u16 {
    let mut chunks = data.chunks_exact(2);
    for c in &mut chunks {
        sum += u32::from(u16::from_be_bytes([c[0], c[1]]));
    }
    if let [last] = chunks.remainder() {
        sum += u32::from(*last) << 8;
    }
    while sum > 0xFFFF {
        sum = (sum & 0xFFFF) + (sum >> 16);
    }
    !(sum as u16)
}

/// An IPv4 or IPv6 packet with a UDP header around `payload`, header and UDP checksums
/// computed, for a [`LINKTYPE_RAW`] capture; none when the two addresses are of different
/// families or the payload does not fit.
pub fn ip_udp_packet(from: SocketAddr, to: SocketAddr, payload: &[u8]) -> Option<Vec<u8>> {
    let udp_len = u16::try_from(8 + payload.len()).ok()?;
    let mut udp = Vec::with_capacity(usize::from(udp_len));
    udp.extend_from_slice(&from.port().to_be_bytes());
    udp.extend_from_slice(&to.port().to_be_bytes());
    udp.extend_from_slice(&udp_len.to_be_bytes());
    udp.extend_from_slice(&[0, 0]);
    udp.extend_from_slice(payload);
    // The checksum over the pseudo-header (every field a whole number of 16-bit words) and
    // the datagram; 0 is sent as 0xFFFF (RFC 768).
    let udp_sum = |pseudo: &[u8], udp: &[u8]| match checksum(0, &[pseudo, udp].concat()) {
        0 => 0xFFFF,
        c => c,
    };
    match (from.ip(), to.ip()) {
        (IpAddr::V4(s), IpAddr::V4(d)) => {
            let total = u16::try_from(20 + udp.len()).ok()?;
            let pseudo = [
                &s.octets()[..],
                &d.octets(),
                &[0, 17],
                &udp_len.to_be_bytes(),
            ]
            .concat();
            let sum = udp_sum(&pseudo, &udp);
            udp[6..8].copy_from_slice(&sum.to_be_bytes());
            let mut ip = vec![0x45, 0];
            ip.extend_from_slice(&total.to_be_bytes());
            ip.extend_from_slice(&[0, 0, 0x40, 0, 64, 17, 0, 0]);
            ip.extend_from_slice(&s.octets());
            ip.extend_from_slice(&d.octets());
            let hsum = checksum(0, &ip);
            ip[10..12].copy_from_slice(&hsum.to_be_bytes());
            ip.extend_from_slice(&udp);
            Some(ip)
        }
        (IpAddr::V6(s), IpAddr::V6(d)) => {
            let len = u32::from(udp_len).to_be_bytes();
            let pseudo = [&s.octets()[..], &d.octets(), &len, &[0, 0, 0, 17]].concat();
            let sum = udp_sum(&pseudo, &udp);
            udp[6..8].copy_from_slice(&sum.to_be_bytes());
            let mut ip = vec![0x60, 0, 0, 0];
            ip.extend_from_slice(&udp_len.to_be_bytes());
            ip.extend_from_slice(&[17, 64]);
            ip.extend_from_slice(&s.octets());
            ip.extend_from_slice(&d.octets());
            ip.extend_from_slice(&udp);
            Some(ip)
        }
        _ => None,
    }
}

fn build_frame(
    src: SocketAddrV4,
    dst: SocketAddrV4,
    seq: u32,
    ack: u32,
    flags: u8,
    ip_id: u16,
    payload: &[u8],
) -> Vec<u8> {
    let tcp_len = 20 + payload.len();
    let ip_len = 20 + tcp_len;
    let mut f = Vec::with_capacity(14 + ip_len);
    f.extend_from_slice(&mac(&dst));
    f.extend_from_slice(&mac(&src));
    f.extend_from_slice(&0x0800u16.to_be_bytes());
    // IPv4 header; the payload is at most MSS so the length fits in 16 bits.
    let ip_start = f.len();
    f.extend_from_slice(&[0x45, 0x00]);
    f.extend_from_slice(&(ip_len as u16).to_be_bytes());
    f.extend_from_slice(&ip_id.to_be_bytes());
    f.extend_from_slice(&[0x40, 0x00, 64, 6, 0, 0]);
    f.extend_from_slice(&src.ip().octets());
    f.extend_from_slice(&dst.ip().octets());
    let ip_sum = checksum(0, &f[ip_start..ip_start + 20]);
    f[ip_start + 10..ip_start + 12].copy_from_slice(&ip_sum.to_be_bytes());
    // TCP header.
    let tcp_start = f.len();
    f.extend_from_slice(&src.port().to_be_bytes());
    f.extend_from_slice(&dst.port().to_be_bytes());
    f.extend_from_slice(&seq.to_be_bytes());
    f.extend_from_slice(&ack.to_be_bytes());
    f.extend_from_slice(&[5 << 4, flags]);
    f.extend_from_slice(&65_535u16.to_be_bytes());
    f.extend_from_slice(&[0, 0, 0, 0]);
    f.extend_from_slice(payload);
    let mut pseudo = 0u32;
    for chunk in [src.ip().octets(), dst.ip().octets()] {
        pseudo += u32::from(u16::from_be_bytes([chunk[0], chunk[1]]));
        pseudo += u32::from(u16::from_be_bytes([chunk[2], chunk[3]]));
    }
    pseudo += 6 + tcp_len as u32;
    let tcp_sum = checksum(pseudo, &f[tcp_start..]);
    f[tcp_start + 16..tcp_start + 18].copy_from_slice(&tcp_sum.to_be_bytes());
    f
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::Ipv4Addr;

    #[test]
    fn ipv4_udp_packet_has_valid_checksums() {
        let from: SocketAddr = "10.0.0.1:2753".parse().unwrap();
        let to: SocketAddr = "239.192.0.1:2753".parse().unwrap();
        let p = ip_udp_packet(from, to, b"abc").unwrap();
        assert_eq!(p.len(), 20 + 8 + 3);
        assert_eq!(p[0], 0x45);
        assert_eq!(u16::from_be_bytes([p[2], p[3]]), 31);
        // A header with its checksum in sums to zero.
        assert_eq!(checksum(0, &p[..20]), 0);
        let mut pseudo = Vec::new();
        pseudo.extend_from_slice(&p[12..20]);
        pseudo.extend_from_slice(&[0, 17, 0, 11]);
        assert_eq!(checksum(0, &[&pseudo[..], &p[20..]].concat()), 0);
    }

    #[test]
    fn ipv6_udp_packet_has_a_valid_checksum() {
        let from: SocketAddr = "[fd00::1]:2753".parse().unwrap();
        let to: SocketAddr = "[ff15::1]:2753".parse().unwrap();
        let p = ip_udp_packet(from, to, b"abcd").unwrap();
        assert_eq!(p.len(), 40 + 8 + 4);
        assert_eq!(p[6], 17);
        let mut pseudo = Vec::new();
        pseudo.extend_from_slice(&p[8..40]);
        pseudo.extend_from_slice(&[0, 0, 0, 12, 0, 0, 0, 17]);
        assert_eq!(checksum(0, &[&pseudo[..], &p[40..]].concat()), 0);
        assert!(ip_udp_packet(from, "10.0.0.1:1".parse().unwrap(), b"").is_none());
    }

    #[test]
    fn rfc1071_example() {
        // RFC 1071 section 3's example words sum to 0xddf2; the checksum is its complement.
        let data = [0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7];
        assert_eq!(checksum(0, &data), !0xddf2);
    }

    #[test]
    fn checksums_verify_and_sequence_numbers_advance() {
        let mut w = PcapWriter::new(Vec::new()).unwrap();
        let c = SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 1), 40_000);
        let s = SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 2), SIS_PORT);
        let mut flow = TcpFlow::new(c, s);
        flow.handshake(&mut w, Duration::from_secs(1)).unwrap();
        flow.data(
            &mut w,
            Duration::from_secs(2),
            Direction::ClientToServer,
            &[0x90, 0xEB, 0, 0, 1, 0x11],
        )
        .unwrap();
        flow.data(
            &mut w,
            Duration::from_secs(2),
            Direction::ServerToClient,
            &vec![1u8; 3000],
        )
        .unwrap();
        let bytes = w.into_inner();
        assert_eq!(&bytes[..4], &[0xD4, 0xC3, 0xB2, 0xA1]);
        // Walk the records: 3 handshake + 1 + 3 data segments.
        let mut pos = 24;
        let mut frames = Vec::new();
        while pos < bytes.len() {
            let len = u32::from_le_bytes(bytes[pos + 8..pos + 12].try_into().unwrap()) as usize;
            frames.push(bytes[pos + 16..pos + 16 + len].to_vec());
            pos += 16 + len;
        }
        assert_eq!(frames.len(), 7);
        for f in &frames {
            // A correct checksum sums (with itself included) to zero.
            assert_eq!(checksum(0, &f[14..34]), 0);
            let tcp = &f[34..];
            let mut pseudo = 0u32;
            for o in [&f[26..28], &f[28..30], &f[30..32], &f[32..34]] {
                pseudo += u32::from(u16::from_be_bytes([o[0], o[1]]));
            }
            pseudo += 6 + tcp.len() as u32;
            assert_eq!(checksum(pseudo, tcp), 0);
        }
        let seq = |f: &Vec<u8>| u32::from_be_bytes(f[38..42].try_into().unwrap());
        assert_eq!(seq(&frames[3]), 1_001);
        assert_eq!(seq(&frames[4]), 500_001);
        assert_eq!(seq(&frames[5]), 500_001 + 1460);
        assert_eq!(frames[6].len(), 14 + 40 + 3000 - 2 * 1460);
    }
}
