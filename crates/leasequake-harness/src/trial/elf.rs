//! A 64-bit little-endian ELF image read by offset, every read bounded
//! (None past its end or on overflow, never a panic): the vDSO the clock is
//! written into, and the executables whose clock `auto` chooses a way for.

/// The image, or as much of its start as was read.
pub struct Image<'a>(&'a [u8]);

/// A program header: its type, where it is in the file and in memory, and
/// its size in the file.
pub struct Segment {
    pub kind: u64,
    pub offset: u64,
    pub vaddr: u64,
    pub filesz: u64,
}

/// PT_LOAD, PT_INTERP, PT_NOTE.
pub const PT_LOAD: u64 = 1;
pub const PT_INTERP: u64 = 3;
pub const PT_NOTE: u64 = 4;

impl<'a> Image<'a> {
    /// None unless `bytes` begin as a 64-bit little-endian ELF image.
    pub fn new(bytes: &'a [u8]) -> Option<Image<'a>> {
        bytes.starts_with(b"\x7fELF\x02\x01").then_some(Image(bytes))
    }

    pub fn u8(&self, at: u64) -> Option<u64> {
        self.le::<1>(at)
    }

    pub fn u16(&self, at: u64) -> Option<u64> {
        self.le::<2>(at)
    }

    pub fn u32(&self, at: u64) -> Option<u64> {
        self.le::<4>(at)
    }

    pub fn u64(&self, at: u64) -> Option<u64> {
        self.le::<8>(at)
    }

    fn le<const N: usize>(&self, at: u64) -> Option<u64> {
        let at = usize::try_from(at).ok()?;
        let mut word = [0u8; 8];
        word[..N].copy_from_slice(self.0.get(at..at.checked_add(N)?)?);
        Some(u64::from_le_bytes(word))
    }

    /// e_machine (62: x86_64).
    pub fn machine(&self) -> Option<u64> {
        self.u16(18)
    }

    /// Its program headers, None if any lies outside what was read.
    pub fn segments(&self) -> Option<Vec<Segment>> {
        let (table, size, count) = (self.u64(32)?, self.u16(54)?, self.u16(56)?);
        (0..count)
            .map(|i| {
                let p = table.checked_add(i * size)?;
                Some(Segment {
                    kind: self.u32(p)?,
                    offset: self.u64(p.checked_add(8)?)?,
                    vaddr: self.u64(p.checked_add(16)?)?,
                    filesz: self.u64(p.checked_add(32)?)?,
                })
            })
            .collect()
    }

    /// The end of its program and section header tables.
    pub fn headers_end(&self) -> Option<u64> {
        let programs = self.u64(32)?.checked_add(self.u16(54)? * self.u16(56)?)?;
        let sections = self.u64(40)?.checked_add(self.u16(58)? * self.u16(60)?)?;
        Some(programs.max(sections))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_past_the_end_or_beyond_any_address_are_none() {
        assert!(Image::new(b"#!/bin/sh\n").is_none());
        let mut b = b"\x7fELF\x02\x01".to_vec();
        b.resize(64, 0);
        b[18] = 62;
        b[32..40].copy_from_slice(&u64::MAX.to_le_bytes());
        b[54] = 56;
        b[56] = 1;
        let image = Image::new(&b).unwrap();
        assert_eq!((image.machine(), image.u16(63), image.u16(64), image.u64(u64::MAX)), (Some(62), None, None, None));
        // A program header table where none can be.
        assert!(image.segments().is_none());
        assert!(image.headers_end().is_none());
    }
}
