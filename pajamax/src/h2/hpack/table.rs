//! The static table (RFC 7541 Appendix A) and the dynamic table (section 2.3.2).
//!
//! The dynamic table keeps every entry's bytes in one buffer, `name` then
//! `value`, oldest first, and a ring of small records (start, lengths) that
//! point into it. Inserting appends to the buffer; evicting only moves the
//! start of the live region forward. When the dead prefix grows at least as
//! large as the live part, the live bytes are moved to the front, so each byte
//! is copied at most once more after it was written, and the buffer never
//! holds more than three times the table's maximum size. Once the buffer and
//! the ring have grown to what the table needs, insertions and evictions do
//! not allocate.

use crate::h2::fields::{classify, FieldInfo};
use std::collections::VecDeque;

/// Number of entries in the static table.
pub(crate) const STATIC_LEN: usize = 61;

/// RFC 7541 Appendix A. Index `i` in HPACK is `STATIC_TABLE[i - 1]`.
pub(crate) static STATIC_TABLE: [(&[u8], &[u8]); STATIC_LEN] = [
    (b":authority", b""),
    (b":method", b"GET"),
    (b":method", b"POST"),
    (b":path", b"/"),
    (b":path", b"/index.html"),
    (b":scheme", b"http"),
    (b":scheme", b"https"),
    (b":status", b"200"),
    (b":status", b"204"),
    (b":status", b"206"),
    (b":status", b"304"),
    (b":status", b"400"),
    (b":status", b"404"),
    (b":status", b"500"),
    (b"accept-charset", b""),
    (b"accept-encoding", b"gzip, deflate"),
    (b"accept-language", b""),
    (b"accept-ranges", b""),
    (b"accept", b""),
    (b"access-control-allow-origin", b""),
    (b"age", b""),
    (b"allow", b""),
    (b"authorization", b""),
    (b"cache-control", b""),
    (b"content-disposition", b""),
    (b"content-encoding", b""),
    (b"content-language", b""),
    (b"content-length", b""),
    (b"content-location", b""),
    (b"content-range", b""),
    (b"content-type", b""),
    (b"cookie", b""),
    (b"date", b""),
    (b"etag", b""),
    (b"expect", b""),
    (b"expires", b""),
    (b"from", b""),
    (b"host", b""),
    (b"if-match", b""),
    (b"if-modified-since", b""),
    (b"if-none-match", b""),
    (b"if-range", b""),
    (b"if-unmodified-since", b""),
    (b"last-modified", b""),
    (b"link", b""),
    (b"location", b""),
    (b"max-forwards", b""),
    (b"proxy-authenticate", b""),
    (b"proxy-authorization", b""),
    (b"range", b""),
    (b"referer", b""),
    (b"refresh", b""),
    (b"retry-after", b""),
    (b"server", b""),
    (b"set-cookie", b""),
    (b"strict-transport-security", b""),
    (b"transfer-encoding", b""),
    (b"user-agent", b""),
    (b"vary", b""),
    (b"via", b""),
    (b"www-authenticate", b""),
];

const fn static_infos() -> [FieldInfo; STATIC_LEN] {
    let mut infos = [FieldInfo::OTHER; STATIC_LEN];
    let mut i = 0;
    while i < STATIC_LEN {
        infos[i] = classify(STATIC_TABLE[i].0, STATIC_TABLE[i].1);
        i += 1;
    }
    infos
}

/// What each static entry is, as a request field (`STATIC_INFO[i]` for HPACK
/// index `i + 1`).
pub(crate) static STATIC_INFO: [FieldInfo; STATIC_LEN] = static_infos();

/// Longest name in the static table ("access-control-allow-origin").
const MAX_STATIC_NAME: usize = 27;

/// The static table's distinct names grouped by length, for the encoder:
/// `groups[start[n]..start[n + 1]]` are the names of length `n`, each as
/// (position of its first entry, number of entries). Entries that share a
/// name are adjacent in the table, so a group's entries are contiguous.
struct NameIndex {
    start: [u8; MAX_STATIC_NAME + 2],
    groups: [(u8, u8); STATIC_LEN],
}

const fn same_bytes(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let mut i = 0;
    while i < a.len() {
        if a[i] != b[i] {
            return false;
        }
        i += 1;
    }
    true
}

const fn build_name_index() -> NameIndex {
    let mut start = [0u8; MAX_STATIC_NAME + 2];
    let mut groups = [(0u8, 0u8); STATIC_LEN];
    let mut next = 0;
    let mut len = 0;
    while len <= MAX_STATIC_NAME {
        start[len] = next as u8;
        let mut i = 0;
        while i < STATIC_LEN {
            let name = STATIC_TABLE[i].0;
            if name.len() == len {
                if next > start[len] as usize
                    && same_bytes(STATIC_TABLE[groups[next - 1].0 as usize].0, name)
                {
                    // Only adjacent entries share a name.
                    assert!(groups[next - 1].0 as usize + groups[next - 1].1 as usize == i);
                    groups[next - 1].1 += 1;
                } else {
                    groups[next] = (i as u8, 1);
                    next += 1;
                }
            }
            i += 1;
        }
        len += 1;
    }
    start[MAX_STATIC_NAME + 1] = next as u8;
    NameIndex { start, groups }
}

static NAME_INDEX: NameIndex = build_name_index();

/// Looks `(name, value)` up in the static table. Returns the HPACK index
/// (1-based) of an entry equal to both, if any, and the smallest index whose
/// name equals `name`, if any.
#[inline]
pub(crate) fn static_find(name: &[u8], value: &[u8]) -> (Option<usize>, Option<usize>) {
    let len = name.len();
    if len > MAX_STATIC_NAME || len == 0 {
        return (None, None);
    }
    let from = NAME_INDEX.start[len] as usize;
    let to = NAME_INDEX.start[len + 1] as usize;
    for &(first, count) in &NAME_INDEX.groups[from..to] {
        let first = first as usize;
        let n = STATIC_TABLE[first].0;
        // Names of one length mostly differ in their last byte.
        if n[len - 1] != name[len - 1] || !bytes_eq(n, name) {
            continue;
        }
        let entries = &STATIC_TABLE[first..first + count as usize];
        let full = entries.iter().position(|e| bytes_eq(e.1, value));
        return (full.map(|i| first + i + 1), Some(first + 1));
    }
    (None, None)
}

/// Byte-string equality for the short strings of header fields, without a
/// call to `memcmp`: words of 8 (or 4) bytes, the last one overlapping.
#[inline]
pub(crate) fn bytes_eq(a: &[u8], b: &[u8]) -> bool {
    let n = a.len();
    if n != b.len() {
        return false;
    }
    if n >= 8 {
        let mut i = 0;
        while i + 8 < n {
            if word64(a, i) != word64(b, i) {
                return false;
            }
            i += 8;
        }
        return word64(a, n - 8) == word64(b, n - 8);
    }
    if n >= 4 {
        return word32(a, 0) == word32(b, 0) && word32(a, n - 4) == word32(b, n - 4);
    }
    a.iter().zip(b).all(|(x, y)| x == y)
}

#[inline(always)]
fn word64(s: &[u8], at: usize) -> u64 {
    let mut w = [0u8; 8];
    w.copy_from_slice(&s[at..at + 8]);
    u64::from_ne_bytes(w)
}

#[inline(always)]
fn word32(s: &[u8], at: usize) -> u32 {
    let mut w = [0u8; 4];
    w.copy_from_slice(&s[at..at + 4]);
    u32::from_ne_bytes(w)
}

/// What a field counts for beyond its name and value, in the HPACK table
/// (RFC 7541 section 4.1) and in a header list (RFC 9113 section 6.5.2).
pub(crate) const ENTRY_OVERHEAD: usize = 32;

/// The size an entry counts for (RFC 7541 section 4.1).
#[inline]
pub(crate) fn entry_size(name_len: usize, value_len: usize) -> usize {
    name_len
        .saturating_add(value_len)
        .saturating_add(ENTRY_OVERHEAD)
}

/// Where the name of a new dynamic entry comes from.
#[derive(Clone, Copy)]
pub(crate) enum NewName<'a> {
    /// These bytes.
    Bytes(&'a [u8]),
    /// The name of the dynamic entry at this position (0 = newest). The entry
    /// may be evicted by the insertion itself; its name is still used.
    Dynamic(usize),
}

/// Bytes reserved by the first insertion (at most the maximum size).
const INITIAL_BYTES: usize = 1024;
/// Entries reserved by the first insertion.
const INITIAL_ENTRIES: usize = 16;

/// `NewName` resolved: caller's bytes, or an absolute position in the buffer.
enum NameSrc<'a> {
    Bytes(&'a [u8]),
    At(usize),
}

#[derive(Clone, Copy, Debug)]
struct Entry {
    /// Position of the name's first byte, counted from the first byte ever
    /// written to the buffer (wrapping), so compaction need not touch entries.
    start: usize,
    name_len: usize,
    value_len: usize,
    /// What the field is, classified once when it entered the table.
    info: FieldInfo,
    /// Unique over the table's life: names the entry's value for caches
    /// above the codec.
    id: u64,
}

/// The dynamic table of one HPACK context.
#[derive(Debug)]
pub(crate) struct DynamicTable {
    /// Entry bytes; `buf[live_start()..]` are the live ones, oldest first.
    buf: Vec<u8>,
    /// Absolute position (see `Entry::start`) of `buf[0]`.
    base: usize,
    /// Oldest at the front, newest at the back.
    entries: VecDeque<Entry>,
    /// Sum of the entries' sizes.
    size: usize,
    max_size: usize,
    /// Counts the changes of the entries' positions (insertions, evictions,
    /// size changes): an encoding made at one count holds while it stays.
    changes: u64,
}

impl DynamicTable {
    pub(crate) fn new(max_size: usize) -> DynamicTable {
        DynamicTable {
            buf: Vec::new(),
            base: 0,
            entries: VecDeque::new(),
            size: 0,
            max_size,
            changes: 0,
        }
    }

    /// The id the next entry gets.
    #[inline]
    pub(crate) fn next_id(&self) -> u64 {
        self.changes + 1
    }

    /// How many times the entries' positions have changed.
    #[inline]
    pub(crate) fn changes(&self) -> u64 {
        self.changes
    }

    /// Number of entries.
    #[inline]
    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }

    /// Current size in the RFC's sense (section 4.1).
    #[cfg(test)]
    pub(crate) fn size(&self) -> usize {
        self.size
    }

    #[inline]
    pub(crate) fn max_size(&self) -> usize {
        self.max_size
    }

    /// The entry at `pos`, 0 being the newest, with what it is and its id.
    #[inline]
    pub(crate) fn get_entry(&self, pos: usize) -> Option<(&[u8], &[u8], &FieldInfo, u64)> {
        let n = self.entries.len();
        if pos >= n {
            return None;
        }
        let e = &self.entries[n - 1 - pos];
        let off = e.start.wrapping_sub(self.base);
        let mid = off + e.name_len;
        Some((
            &self.buf[off..mid],
            &self.buf[mid..mid + e.value_len],
            &e.info,
            e.id,
        ))
    }

    /// The entry at `pos`, 0 being the newest (HPACK index 62).
    #[inline]
    pub(crate) fn get(&self, pos: usize) -> Option<(&[u8], &[u8])> {
        let n = self.entries.len();
        if pos >= n {
            return None;
        }
        let e = self.entries[n - 1 - pos];
        let off = e.start.wrapping_sub(self.base);
        let mid = off + e.name_len;
        Some((&self.buf[off..mid], &self.buf[mid..mid + e.value_len]))
    }

    /// Sets a new maximum size, evicting the oldest entries until it is met.
    pub(crate) fn set_max_size(&mut self, max_size: usize) {
        self.changes += 1;
        self.max_size = max_size;
        while self.size > self.max_size {
            self.evict_oldest();
        }
        if self.entries.is_empty() {
            self.clear();
        }
    }

    /// Searches newest first. Returns the position (0 = newest) of an entry
    /// equal to `(name, value)`, if any, and of the newest entry whose name is
    /// `name`, if any.
    #[inline]
    pub(crate) fn find(&self, name: &[u8], value: &[u8]) -> (Option<usize>, Option<usize>) {
        let mut name_pos = None;
        for (pos, e) in self.entries.iter().rev().enumerate() {
            if e.name_len != name.len() {
                continue;
            }
            let off = e.start.wrapping_sub(self.base);
            let mid = off + e.name_len;
            if !bytes_eq(&self.buf[off..mid], name) {
                continue;
            }
            if name_pos.is_none() {
                name_pos = Some(pos);
            }
            if bytes_eq(&self.buf[mid..mid + e.value_len], value) {
                return (Some(pos), name_pos);
            }
        }
        (None, name_pos)
    }

    /// Adds an entry as the newest, evicting old ones to make room (RFC 7541
    /// section 4.4). An entry larger than the maximum size empties the table
    /// and is not added; returns whether it was added.
    pub(crate) fn insert(&mut self, name: NewName<'_>, value: &[u8]) -> bool {
        self.insert_classified(name, value, FieldInfo::OTHER)
    }

    /// As [`DynamicTable::insert`], keeping what the field is with it.
    pub(crate) fn insert_classified(
        &mut self,
        name: NewName<'_>,
        value: &[u8],
        info: FieldInfo,
    ) -> bool {
        self.changes += 1;
        // Where the name's bytes are, before anything moves.
        let (name_src, name_len) = match name {
            NewName::Bytes(b) => (NameSrc::Bytes(b), b.len()),
            NewName::Dynamic(pos) => {
                let n = self.entries.len();
                debug_assert!(pos < n);
                let e = self.entries[n - 1 - pos];
                (NameSrc::At(e.start), e.name_len)
            }
        };
        let size = entry_size(name_len, value.len());
        if size > self.max_size {
            self.entries.clear();
            self.size = 0;
            self.clear();
            return false;
        }

        // Compact while the referenced name is still live: eviction below
        // only forgets entries, it never moves or overwrites bytes, so the
        // name stays readable even if its entry goes.
        let live = self.live_start();
        if live > 0 && live >= self.buf.len() - live {
            self.buf.copy_within(live.., 0);
            self.buf.truncate(self.buf.len() - live);
            self.base = self.base.wrapping_add(live);
        }

        while self.size.saturating_add(size) > self.max_size {
            self.evict_oldest();
        }

        if self.buf.capacity() == 0 {
            // One allocation for the first few entries instead of a series
            // of doublings from nothing.
            self.buf
                .reserve(self.max_size.min(INITIAL_BYTES).max(name_len + value.len()));
            self.entries.reserve(INITIAL_ENTRIES);
        }
        let start = self.base.wrapping_add(self.buf.len());
        match name_src {
            NameSrc::At(abs) => {
                let off = abs.wrapping_sub(self.base);
                self.buf.extend_from_within(off..off + name_len);
            }
            NameSrc::Bytes(b) => self.buf.extend_from_slice(b),
        }
        self.buf.extend_from_slice(value);
        self.entries.push_back(Entry {
            start,
            name_len,
            value_len: value.len(),
            info,
            id: self.changes,
        });
        self.size += size;
        true
    }

    /// Index in `buf` of the oldest live byte.
    #[inline]
    fn live_start(&self) -> usize {
        match self.entries.front() {
            Some(e) => e.start.wrapping_sub(self.base),
            None => self.buf.len(),
        }
    }

    fn evict_oldest(&mut self) {
        if let Some(e) = self.entries.pop_front() {
            self.size -= entry_size(e.name_len, e.value_len);
        }
    }

    /// Drops the bytes of an empty table (keeps the allocation).
    fn clear(&mut self) {
        debug_assert!(self.entries.is_empty());
        self.base = self.base.wrapping_add(self.buf.len());
        self.buf.clear();
    }
}

#[cfg(test)]
impl DynamicTable {
    /// The entries, newest first, and the table's size.
    pub(crate) fn contents(&self) -> super::TableContents {
        let entries = (0..self.len())
            .map(|i| {
                let (n, v) = self.get(i).unwrap();
                (n.to_vec(), v.to_vec())
            })
            .collect();
        (entries, self.size())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn contents(t: &DynamicTable) -> Vec<(Vec<u8>, Vec<u8>)> {
        (0..t.len())
            .map(|i| {
                let (n, v) = t.get(i).unwrap();
                (n.to_vec(), v.to_vec())
            })
            .collect()
    }

    #[test]
    fn bytes_eq_agrees_with_slice_eq() {
        let base: Vec<u8> = (0..40u8).collect();
        for n in 0..40 {
            let a = &base[..n];
            assert!(bytes_eq(a, a));
            assert!(!bytes_eq(a, &base[..n + 1]));
            for i in 0..n {
                let mut b = a.to_vec();
                b[i] ^= 0x20;
                assert!(!bytes_eq(a, &b), "len {n} differing at {i}");
            }
        }
    }

    #[test]
    fn static_table_shape() {
        assert_eq!(STATIC_TABLE.len(), 61);
        assert_eq!(STATIC_TABLE[0], (&b":authority"[..], &b""[..]));
        assert_eq!(STATIC_TABLE[7], (&b":status"[..], &b"200"[..]));
        assert_eq!(STATIC_TABLE[60], (&b"www-authenticate"[..], &b""[..]));
        let longest = STATIC_TABLE.iter().map(|e| e.0.len()).max().unwrap();
        assert_eq!(longest, MAX_STATIC_NAME);
    }

    #[test]
    fn static_find_matches_linear_search() {
        for (i, &(name, value)) in STATIC_TABLE.iter().enumerate() {
            let first_name = STATIC_TABLE.iter().position(|e| e.0 == name).unwrap() + 1;
            assert_eq!(static_find(name, value), (Some(i + 1), Some(first_name)));
            assert_eq!(static_find(name, b"\xffnope"), (None, Some(first_name)));
        }
        assert_eq!(static_find(b":status", b"200"), (Some(8), Some(8)));
        assert_eq!(static_find(b":status", b"500"), (Some(14), Some(8)));
        assert_eq!(static_find(b":method", b"POST"), (Some(3), Some(2)));
        assert_eq!(
            static_find(b"content-type", b"application/grpc"),
            (None, Some(31))
        );
        assert_eq!(static_find(b"grpc-status", b"0"), (None, None));
        assert_eq!(static_find(b"", b""), (None, None));
        assert_eq!(static_find(&[b'x'; 200], b""), (None, None));
    }

    #[test]
    fn insert_evicts_oldest_and_keeps_order() {
        let mut t = DynamicTable::new(100);
        assert!(t.insert(NewName::Bytes(b"a"), b"1")); // 34
        assert!(t.insert(NewName::Bytes(b"b"), b"2")); // 68
        assert_eq!(t.size(), 68);
        assert!(t.insert(NewName::Bytes(b"c"), b"3")); // evicts a
        assert_eq!(t.size(), 68);
        assert_eq!(
            contents(&t),
            vec![
                (b"c".to_vec(), b"3".to_vec()),
                (b"b".to_vec(), b"2".to_vec())
            ]
        );
        assert_eq!(t.find(b"b", b"2"), (Some(1), Some(1)));
        assert_eq!(t.find(b"b", b"9"), (None, Some(1)));
        assert_eq!(t.find(b"a", b"1"), (None, None));
    }

    #[test]
    fn too_large_entry_empties_table() {
        let mut t = DynamicTable::new(64);
        assert!(t.insert(NewName::Bytes(b"a"), b"1"));
        assert!(!t.insert(NewName::Bytes(b"name"), &[b'v'; 40]));
        assert_eq!(t.len(), 0);
        assert_eq!(t.size(), 0);
        // Exactly the maximum fits.
        assert!(t.insert(NewName::Bytes(b"ab"), &[b'v'; 30]));
        assert_eq!(t.size(), 64);
    }

    #[test]
    fn name_of_entry_evicted_by_its_own_insertion() {
        // Section 4.4: the referenced name must survive the eviction.
        let mut t = DynamicTable::new(80);
        assert!(t.insert(NewName::Bytes(b"long-name"), b"x")); // 42
        assert!(t.insert(NewName::Dynamic(0), b"yy")); // 43, evicts the first
        assert_eq!(contents(&t), vec![(b"long-name".to_vec(), b"yy".to_vec())]);
        assert_eq!(t.size(), 43);
        // Many rounds so compaction runs while a name is referenced.
        for i in 0..1000u32 {
            let v = i.to_string();
            assert!(t.insert(NewName::Dynamic(0), v.as_bytes()));
            assert_eq!(t.get(0).unwrap(), (&b"long-name"[..], v.as_bytes()));
        }
        assert!(t.buf.len() <= 3 * 80, "buffer grew to {}", t.buf.len());
    }

    #[test]
    fn buffer_stays_bounded() {
        let mut t = DynamicTable::new(4096);
        let mut x = 1u32;
        for _ in 0..20_000 {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            let v = vec![b'a' + (x % 26) as u8; (x % 300) as usize];
            t.insert(NewName::Bytes(b"k"), &v);
            assert!(t.size() <= 4096);
            assert!(t.buf.len() <= 3 * 4096);
            let live: usize = t.entries.iter().map(|e| e.name_len + e.value_len).sum();
            assert_eq!(t.buf.len() - t.live_start(), live);
        }
    }

    #[test]
    fn shrinking_max_size_evicts() {
        let mut t = DynamicTable::new(4096);
        for i in 0..10u8 {
            t.insert(NewName::Bytes(&[b'a' + i]), b"v");
        }
        assert_eq!(t.size(), 340);
        t.set_max_size(100);
        assert_eq!(t.len(), 2);
        assert_eq!(t.get(0).unwrap().0, b"j");
        t.set_max_size(0);
        assert_eq!(t.len(), 0);
        assert_eq!(t.size(), 0);
        assert!(!t.insert(NewName::Bytes(b"a"), b""));
    }
}
