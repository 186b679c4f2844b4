//! The byte-level pieces every stored encoding is built from: length-prefixed
//! strings and a bounds-checked reader. The stores (committed offsets, group
//! records) and the engines that hand a store their own encoded records (the
//! transaction coordinator) share them, so every format reports damage the same way.
//!
//! Pure functions, no I/O. Invariant: a `Reader` never reads past its slice; every
//! short, overlong or non-UTF-8 input is an `InvalidData` error naming what was read,
//! never a panic.

use std::io;

/// Appends `bytes` after their length as a big-endian u32.
pub fn put_len_prefixed(out: &mut Vec<u8>, bytes: &[u8]) {
    // Group ids, topics and metadata arrive as Kafka strings (i16 length) or compact strings
    // (varint length, bounded by the request size), far below 4 GiB.
    let len = u32::try_from(bytes.len()).expect("stored string shorter than 4 GiB");
    out.extend_from_slice(&len.to_be_bytes());
    out.extend_from_slice(bytes);
}

/// The error for stored bytes that do not decode: `what` was being read, `why` it failed.
pub fn invalid(what: &str, why: &str) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        format!("malformed {what}: {why}"),
    )
}

/// A cursor over stored bytes in which every read is bounds-checked.
pub struct Reader<'a> {
    bytes: &'a [u8],
    pos: usize,
    what: &'static str,
}

impl<'a> Reader<'a> {
    pub fn new(bytes: &'a [u8], what: &'static str) -> Reader<'a> {
        Reader {
            bytes,
            pos: 0,
            what,
        }
    }

    pub fn take(&mut self, len: usize) -> io::Result<&'a [u8]> {
        let end = self
            .pos
            .checked_add(len)
            .filter(|end| *end <= self.bytes.len())
            .ok_or_else(|| invalid(self.what, "truncated"))?;
        let out = &self.bytes[self.pos..end];
        self.pos = end;
        Ok(out)
    }

    pub fn array<const N: usize>(&mut self) -> io::Result<[u8; N]> {
        let mut out = [0u8; N];
        out.copy_from_slice(self.take(N)?);
        Ok(out)
    }

    pub fn version(&mut self, expected: u8) -> io::Result<()> {
        let [version] = self.array::<1>()?;
        if version != expected {
            return Err(invalid(self.what, "unknown format version"));
        }
        Ok(())
    }

    pub fn len_prefixed_str(&mut self) -> io::Result<String> {
        let len = u32::from_be_bytes(self.array()?) as usize;
        let bytes = self.take(len)?;
        String::from_utf8(bytes.to_vec()).map_err(|_| invalid(self.what, "not UTF-8"))
    }

    /// Bytes read so far.
    pub fn position(&self) -> usize {
        self.pos
    }

    pub fn finish(&self) -> io::Result<()> {
        if self.pos != self.bytes.len() {
            return Err(invalid(self.what, "trailing bytes"));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_stop_at_the_end_and_leftovers_are_refused() {
        let mut bytes = vec![1];
        put_len_prefixed(&mut bytes, "é".as_bytes());
        let mut reader = Reader::new(&bytes, "test value");
        assert!(reader.version(1).is_ok());
        assert_eq!(reader.len_prefixed_str().ok().as_deref(), Some("é"));
        assert_eq!(reader.position(), bytes.len());
        assert!(reader.finish().is_ok());
        assert!(reader.array::<1>().is_err());

        let mut reader = Reader::new(&bytes[..bytes.len() - 1], "test value");
        assert!(reader.version(1).is_ok());
        assert!(reader.len_prefixed_str().is_err());
        assert!(Reader::new(&bytes, "test value").finish().is_err());
        assert!(Reader::new(&[2], "test value").version(1).is_err());
    }
}
