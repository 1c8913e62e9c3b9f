//! Hand-built payloads for the decoder tests.
#![allow(dead_code, reason = "each test crate uses a part")]

/// The fixed header fields of a forged payload.
pub struct Forged {
    /// Mode byte (0 fp32, 1 int8, 4 sparse; 2 and 3 are retired sparse formats).
    pub mode: u8,
    /// Elements per scale / selection.
    pub chunk: u32,
    /// Elements per zstd frame.
    pub block: u32,
    /// Kept per chunk (written in sparse mode only).
    pub topk: u32,
}

impl Forged {
    /// The int8 header the encoder writes by default (chunk 1024, 1 Mi-element blocks).
    pub const INT8: Forged = Forged {
        mode: 1,
        chunk: 1024,
        block: 1 << 20,
        topk: 0,
    };

    /// A payload with a valid checksum around this header, `shapes` and `frames`.
    pub fn bytes(&self, shapes: &[&[u64]], frames: &[Vec<u8>]) -> Vec<u8> {
        let mut out = b"SYNG".to_vec();
        out.extend_from_slice(&[1, self.mode, 0, 0]);
        out.extend_from_slice(&self.chunk.to_le_bytes());
        out.extend_from_slice(&self.block.to_le_bytes());
        if self.mode >= 2 {
            out.extend_from_slice(&self.topk.to_le_bytes());
        }
        out.extend_from_slice(&(shapes.len() as u32).to_le_bytes());
        for s in shapes {
            out.push(s.len() as u8);
            for d in *s {
                out.extend_from_slice(&d.to_le_bytes());
            }
        }
        for f in frames {
            out.extend_from_slice(&(f.len() as u32).to_le_bytes());
            out.extend_from_slice(f);
        }
        let sum = blake3::hash(&out);
        out.extend_from_slice(sum.as_bytes());
        out
    }
}

/// Every proper prefix of `bytes` and `bytes` plus one byte are refused with a typed error
/// (`decode` never panics on them).
pub fn assert_only_the_whole_payload_decodes(bytes: &[u8], limits: &synod_codec::DecodeLimits) {
    for len in 0..bytes.len() {
        assert!(
            synod_codec::decode(&bytes[..len], limits).is_err(),
            "prefix of {len} bytes accepted"
        );
    }
    let mut longer = bytes.to_vec();
    longer.push(0);
    assert!(synod_codec::decode(&longer, limits).is_err());
}
