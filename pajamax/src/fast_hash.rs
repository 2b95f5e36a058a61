//! Hashers for the per-request maps: SipHash's resistance to chosen keys
//! buys nothing for keys the server picks or bounds, and costs time on
//! every request.

use std::hash::{BuildHasherDefault, Hasher};

/// For `u32` stream ids: client ids are distinct odd numbers, a multiply
/// spreads them over the table.
#[derive(Default)]
pub(crate) struct StreamIdHasher(u64);

impl Hasher for StreamIdHasher {
    fn finish(&self) -> u64 {
        // The table picks a bucket with the low bits: those of a product
        // depend only on the low bits of the id, so the high half (which
        // depends on all of them) goes there.
        self.0.rotate_left(32)
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 << 8 | u64::from(b)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        }
    }

    fn write_u32(&mut self, n: u32) {
        self.0 = u64::from(n).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
}

/// Builds [`StreamIdHasher`]s.
pub(crate) type BuildStreamIdHasher = BuildHasherDefault<StreamIdHasher>;

/// FNV-1a, for route paths: the keys are the server's own method paths,
/// looked up with the request's `:path`.
pub(crate) struct PathHasher(u64);

impl Default for PathHasher {
    fn default() -> PathHasher {
        PathHasher(0xcbf2_9ce4_8422_2325)
    }
}

impl Hasher for PathHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
}

/// Builds [`PathHasher`]s.
pub(crate) type BuildPathHasher = BuildHasherDefault<PathHasher>;
