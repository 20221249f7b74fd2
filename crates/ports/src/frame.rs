//! A received frame, seen in place: [`FrameMut`].
//!
//! A frame is a window inside a larger buffer — a slot of the TPACKET_V3 block, a UMEM chunk, a
//! pcap port's buffer — with free bytes before it (*headroom*) and sometimes after it
//! (*tailroom*). Actions rewrite the bytes in place ([`FrameMut::data_mut`]) and change the
//! length without copying the frame:
//!
//! - `strip_vlan` is [`FrameMut::remove`]`(12, 4)`: the 12 bytes of MAC addresses move 4 bytes
//!   towards the end and the frame starts 4 bytes later.
//! - pushing a VLAN tag (`mod_vlan_vid` on an untagged frame) is [`FrameMut::insert`]`(12, 4)`
//!   followed by writing the TPID and TCI into the gap: the MAC addresses move into the headroom.
//!   Every port type leaves at least [`MIN_HEADROOM`] bytes of headroom.
//!
//! The transmit side takes `&[u8]`, so a rewritten frame is sent as `frame.data()`.
//!
//! No method panics: an impossible request (more bytes than the buffer has) returns `false` and
//! leaves the frame as it was.

/// The headroom every port type guarantees in front of a received frame (enough for two VLAN
/// tags; AF_PACKET frames whose tag the kernel took out get it back from this room first).
pub const MIN_HEADROOM: usize = 8;

/// A received frame, borrowed from its batch: read and rewrite its bytes, grow or shrink it.
pub struct FrameMut<'a> {
    buf: &'a mut [u8],
    head: &'a mut usize,
    len: &'a mut usize,
}

impl<'a> FrameMut<'a> {
    pub(crate) fn new(buf: &'a mut [u8], head: &'a mut usize, len: &'a mut usize) -> FrameMut<'a> {
        *head = (*head).min(buf.len());
        *len = (*len).min(buf.len() - *head);
        FrameMut { buf, head, len }
    }

    /// The frame's bytes.
    pub fn data(&self) -> &[u8] {
        &self.buf[*self.head..*self.head + *self.len]
    }

    /// The frame's bytes, writable: rewrite headers in place.
    pub fn data_mut(&mut self) -> &mut [u8] {
        &mut self.buf[*self.head..*self.head + *self.len]
    }

    pub fn len(&self) -> usize {
        *self.len
    }

    pub fn is_empty(&self) -> bool {
        *self.len == 0
    }

    /// Free bytes in front of the frame.
    pub fn headroom(&self) -> usize {
        *self.head
    }

    /// Free bytes after the frame.
    pub fn tailroom(&self) -> usize {
        self.buf.len() - *self.head - *self.len
    }

    /// Grows the frame by `n` bytes at the front (taken from the headroom; their content is
    /// whatever the buffer held). False if the headroom is smaller.
    pub fn push_head(&mut self, n: usize) -> bool {
        if n > *self.head {
            return false;
        }
        *self.head -= n;
        *self.len += n;
        true
    }

    /// Drops the first `n` bytes of the frame. False if the frame is shorter.
    pub fn pull_head(&mut self, n: usize) -> bool {
        if n > *self.len {
            return false;
        }
        *self.head += n;
        *self.len -= n;
        true
    }

    /// Sets the length: truncates, or grows into the tailroom (new bytes hold whatever the buffer
    /// held). False if the tailroom is too small.
    pub fn set_len(&mut self, len: usize) -> bool {
        if len > self.buf.len() - *self.head {
            return false;
        }
        *self.len = len;
        true
    }

    /// Opens a gap of `n` zero bytes at offset `at`: the `at` bytes before it move into the
    /// headroom when it is large enough, otherwise the bytes after it move into the tailroom.
    /// False (frame unchanged) if `at > len()` or neither room suffices.
    pub fn insert(&mut self, at: usize, n: usize) -> bool {
        let (head, len) = (*self.head, *self.len);
        if at > len {
            return false;
        }
        if n <= head {
            self.buf.copy_within(head..head + at, head - n);
            *self.head = head - n;
        } else if n <= self.tailroom() {
            self.buf.copy_within(head + at..head + len, head + at + n);
        } else {
            return false;
        }
        *self.len = len + n;
        let start = *self.head + at;
        self.buf[start..start + n].fill(0);
        true
    }

    /// Removes `n` bytes at offset `at`, moving whichever side of the gap is shorter. False
    /// (frame unchanged) if `at + n > len()`.
    pub fn remove(&mut self, at: usize, n: usize) -> bool {
        let (head, len) = (*self.head, *self.len);
        let Some(end) = at.checked_add(n).filter(|&end| end <= len) else { return false };
        if at <= len - end {
            self.buf.copy_within(head..head + at, head + n);
            *self.head = head + n;
        } else {
            self.buf.copy_within(head + end..head + len, head + at);
        }
        *self.len = len - n;
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with_frame(buf: &mut [u8], head: usize, len: usize, f: impl FnOnce(&mut FrameMut<'_>)) -> (usize, usize) {
        let (mut h, mut l) = (head, len);
        f(&mut FrameMut::new(buf, &mut h, &mut l));
        (h, l)
    }

    #[test]
    fn strip_and_push_vlan_in_place() {
        let payload = [0xaa; 30];
        let tagged: Vec<u8> = (0..12).chain([0x81, 0x00, 0x00, 0x05, 0x08, 0x00]).chain(payload).collect();
        let untagged: Vec<u8> = (0..12).chain([0x08, 0x00]).chain(payload).collect();
        let mut buf = vec![0xee; 60];
        buf[8..8 + tagged.len()].copy_from_slice(&tagged);
        let (h, l) = with_frame(&mut buf, 8, tagged.len(), |f| {
            assert!(f.remove(12, 4));
            assert_eq!(f.data(), &untagged[..]);
            assert_eq!(f.headroom(), 12);
            assert!(f.insert(12, 4));
            f.data_mut()[12..16].copy_from_slice(&[0x81, 0x00, 0x00, 0x05]);
            assert_eq!(f.data(), &tagged[..]);
        });
        assert_eq!((h, l), (8, tagged.len()));
    }

    #[test]
    fn insert_uses_tailroom_without_headroom_and_refuses_when_full() {
        let mut buf: Vec<u8> = (0..10).collect();
        with_frame(&mut buf, 0, 6, |f| {
            assert!(f.insert(2, 4));
            assert_eq!(f.data(), &[0, 1, 0, 0, 0, 0, 2, 3, 4, 5]);
            assert!(!f.insert(0, 1));
            assert!(!f.remove(8, 3));
            assert!(f.remove(8, 2));
            assert_eq!(f.data(), &[0, 1, 0, 0, 0, 0, 2, 3]);
            assert!(!f.push_head(1));
            assert!(f.pull_head(2) && f.push_head(2));
            assert!(!f.set_len(11) && f.set_len(10) && f.set_len(3));
            assert_eq!(f.data(), &[0, 1, 0]);
        });
    }

    #[test]
    fn out_of_range_windows_are_clamped() {
        let mut buf = [1u8; 4];
        assert_eq!(with_frame(&mut buf, 9, 9, |f| assert!(f.is_empty())), (4, 0));
        assert_eq!(with_frame(&mut buf, 1, 9, |f| assert_eq!(f.len(), 3)), (1, 3));
    }
}
