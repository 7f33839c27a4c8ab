//! A hash of bytes that is the same on every machine and in every version.

/// FNV-1a, 64 bits: stable across versions and machines (std's hasher is
/// not), and enough to tell two files, or two trials' lock paths, apart.
pub fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, b| (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3))
}

#[cfg(test)]
mod tests {
    #[test]
    fn fnv1a_is_the_published_function() {
        assert_eq!(super::fnv1a(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(super::fnv1a(b"a"), 0xaf63_dc4c_8601_ec8c);
    }
}
