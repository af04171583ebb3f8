//! Shared by the `arq_receiver` and `node_receive` fuzz targets (included with `#[path]`, not a
//! target of its own): the DATA D_PDU header a fuzz byte describes.

use skywave_emu::dpdu::DataHeader;

/// A DATA header whose six flags are the low bits of `b` (C_PDU START, END, DELIVER IN ORDER,
/// DROP, TX UWE, TX LWE) and whose sequence number is `fsn`.
pub fn data_header(b: u8, fsn: u8) -> DataHeader {
    DataHeader {
        start: b & 1 != 0,
        end: b & 2 != 0,
        deliver_in_order: b & 4 != 0,
        drop: b & 8 != 0,
        tx_uwe: b & 16 != 0,
        tx_lwe: b & 32 != 0,
        fsn,
    }
}
