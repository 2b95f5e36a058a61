//! A map keyed by client stream ids that finds a value without hashing in
//! the common case.
//!
//! Client stream ids are odd and rising (RFC 9113 section 5.1.1), and the
//! streams open at one time were mostly opened close together: stream
//! `id` gets a place of its own at `(id >> 1) % places`, where the number
//! of places is a power of two. A value whose place is taken when it comes
//! (by a stream opened `places` ids earlier and still open) goes to a hash
//! table of displaced values. The places double when a value would be
//! displaced while the map holds at least half as many values as there are
//! places, up to [`MAX_PLACES`]; past that (a client that keeps a few streams open for
//! long, or picks ids that share a place) the displaced table takes the
//! rest, so memory stays bounded by the number of open streams. The places
//! only double as values come; [`StreamMap::trim`], called away from the
//! requests' way, gives most of them back once few values are left, so a
//! burst of streams does not leave its room behind. The map knows the highest
//! displaced id: a look-up of a newer id, or the insert
//! of one, does not touch the displaced table, so streams held open for
//! long do not slow the ones that come and go after them.

use crate::fast_hash::BuildStreamIdHasher;
use std::collections::HashMap;

/// Places of a map's direct-mapped part when it takes its first value.
const FIRST_PLACES: usize = 8;

/// The most places the direct-mapped part grows to.
const MAX_PLACES: usize = 8192;

/// The places [`StreamMap::trim`] leaves however few values there are, so
/// that a connection whose streams come and go around a few hundred does
/// not regrow its places at every burst.
const KEPT_PLACES: usize = 256;

/// Values by client stream id. See the module's documentation.
pub(crate) struct StreamMap<T> {
    /// A power-of-two number of places (none before the first value), each
    /// empty or holding a value with its id.
    places: Vec<Option<(u32, T)>>,
    /// Values whose place was taken when they came.
    displaced: Displaced<T>,
    /// How many values the map holds, in both parts.
    len: usize,
}

impl<T> Default for StreamMap<T> {
    fn default() -> StreamMap<T> {
        StreamMap {
            places: Vec::new(),
            displaced: Displaced::default(),
            len: 0,
        }
    }
}

impl<T> StreamMap<T> {
    /// Where `id` belongs in the direct-mapped part; past its end while it
    /// has no places.
    #[inline]
    fn place_of(&self, id: u32) -> usize {
        (id >> 1) as usize & self.places.len().wrapping_sub(1)
    }

    #[inline]
    pub(crate) fn get(&self, id: u32) -> Option<&T> {
        match self.places.get(self.place_of(id)) {
            Some(Some((at, value))) if *at == id => Some(value),
            _ => self.displaced.get(id),
        }
    }

    #[inline]
    pub(crate) fn get_mut(&mut self, id: u32) -> Option<&mut T> {
        let place = self.place_of(id);
        match self.places.get_mut(place) {
            Some(Some((at, value))) if *at == id => Some(value),
            _ => self.displaced.get_mut(id),
        }
    }

    pub(crate) fn contains_key(&self, id: u32) -> bool {
        self.get(id).is_some()
    }

    /// Puts `value` under `id`, in place of the value it had if any.
    #[inline(always)]
    pub(crate) fn insert(&mut self, id: u32, value: T) {
        let place = self.place_of(id);
        if let Some(free @ None) = self.places.get_mut(place) {
            if !self.displaced.may_hold(id) {
                // Not in the map: its place is free and it is not displaced.
                *free = Some((id, value));
                self.len += 1;
                return;
            }
        }
        self.insert_slow(id, value);
    }

    /// [`StreamMap::insert`] when `id`'s place is taken, `id` may be
    /// displaced, or there are no places yet.
    #[inline(never)]
    fn insert_slow(&mut self, id: u32, value: T) {
        if self.places.is_empty() {
            self.places.resize_with(FIRST_PLACES, || None);
        }
        let mut place = self.place_of(id);
        match &mut self.places[place] {
            Some((at, old)) if *at == id => {
                *old = value;
                return;
            }
            Some(_) => {
                if let Some(old) = self.displaced.get_mut(id) {
                    *old = value;
                    return;
                }
                if self.len >= self.places.len() / 2 && self.places.len() < MAX_PLACES {
                    self.grow();
                    place = self.place_of(id);
                }
            }
            None => {
                // Displaced before its place came free: it moves there, and
                // is counted again below.
                if self.displaced.remove(id).is_some() {
                    self.len -= 1;
                }
            }
        }
        self.len += 1;
        match &mut self.places[place] {
            free @ None => *free = Some((id, value)),
            Some(_) => self.displaced.insert(id, value),
        }
    }

    /// Doubles the places and puts every value where it now belongs, the
    /// displaced ones too where their place is free.
    #[cold]
    fn grow(&mut self) {
        self.rebuild(self.places.len() * 2);
    }

    /// Gives back the room of places far more than the values need (after
    /// a burst of streams, once most have ended): down to twice the values,
    /// and no fewer than [`KEPT_PLACES`]. Not done as values are removed,
    /// which every request does, but now and then (the worker's sweep).
    pub(crate) fn trim(&mut self) {
        let wanted = (2 * self.len).next_power_of_two().max(KEPT_PLACES);
        if self.places.len() > wanted {
            self.rebuild(wanted);
        } else if self.displaced.map.is_empty() && self.displaced.map.capacity() > KEPT_PLACES {
            self.displaced = Displaced::default();
        }
    }

    /// Puts every value where it belongs among `places` new places (a
    /// power of two), the displaced ones too where their place is free.
    #[cold]
    fn rebuild(&mut self, places: usize) {
        let old = std::mem::take(&mut self.places);
        self.places.resize_with(places, || None);
        let displaced = std::mem::take(&mut self.displaced);
        for (id, value) in old.into_iter().flatten().chain(displaced.map) {
            let place = self.place_of(id);
            match &mut self.places[place] {
                free @ None => *free = Some((id, value)),
                Some(_) => self.displaced.insert(id, value),
            }
        }
    }

    pub(crate) fn remove(&mut self, id: u32) -> Option<T> {
        let place = self.place_of(id);
        let removed = match self.places.get_mut(place) {
            Some(slot) if slot.as_ref().is_some_and(|(at, _)| *at == id) => {
                slot.take().map(|(_, value)| value)
            }
            _ => self.displaced.remove(id),
        };
        if removed.is_some() {
            self.len -= 1;
        }
        removed
    }

    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// How many places the direct-mapped part has.
    #[cfg(test)]
    pub(crate) fn places(&self) -> usize {
        self.places.len()
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The ids, in no particular order.
    pub(crate) fn keys(&self) -> impl Iterator<Item = u32> + '_ {
        self.iter().map(|(id, _)| id)
    }

    pub(crate) fn values(&self) -> impl Iterator<Item = &T> {
        self.iter().map(|(_, value)| value)
    }

    pub(crate) fn values_mut(&mut self) -> impl Iterator<Item = &mut T> {
        self.iter_mut().map(|(_, value)| value)
    }

    /// The ids with their values, in no particular order. The places are
    /// walked only as far as their last value: a map that once held
    /// thousands of streams and now holds none costs nothing to walk.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (u32, &T)> {
        let placed = self.len - self.displaced.map.len();
        self.places
            .iter()
            .flatten()
            .take(placed)
            .map(|(id, value)| (*id, value))
            .chain(self.displaced.map.iter().map(|(id, value)| (*id, value)))
    }

    /// As [`StreamMap::iter`].
    pub(crate) fn iter_mut(&mut self) -> impl Iterator<Item = (u32, &mut T)> {
        let placed = self.len - self.displaced.map.len();
        self.places
            .iter_mut()
            .flatten()
            .take(placed)
            .map(|(id, value)| (*id, value))
            .chain(
                self.displaced
                    .map
                    .iter_mut()
                    .map(|(id, value)| (*id, value)),
            )
    }

    /// Drops every value; the places stay.
    pub(crate) fn clear(&mut self) {
        self.places.iter_mut().for_each(|place| *place = None);
        self.displaced = Displaced::default();
        self.len = 0;
    }
}

/// The values of a [`StreamMap`] whose place was taken, with a bound on
/// their ids: client ids rise, so a newer id is known not to be here
/// without a look-up.
struct Displaced<T> {
    map: HashMap<u32, T, BuildStreamIdHasher>,
    /// No id in `map` is above it; 0 while `map` is empty.
    max: u32,
}

impl<T> Default for Displaced<T> {
    fn default() -> Displaced<T> {
        Displaced {
            map: HashMap::default(),
            max: 0,
        }
    }
}

impl<T> Displaced<T> {
    /// Whether `id` may be here (it is not above every id here).
    #[inline]
    fn may_hold(&self, id: u32) -> bool {
        id <= self.max
    }

    #[inline]
    fn get(&self, id: u32) -> Option<&T> {
        if !self.may_hold(id) {
            return None;
        }
        self.map.get(&id)
    }

    #[inline]
    fn get_mut(&mut self, id: u32) -> Option<&mut T> {
        if !self.may_hold(id) {
            return None;
        }
        self.map.get_mut(&id)
    }

    fn insert(&mut self, id: u32, value: T) {
        self.map.insert(id, value);
        self.max = self.max.max(id);
    }

    fn remove(&mut self, id: u32) -> Option<T> {
        if !self.may_hold(id) {
            return None;
        }
        let removed = self.map.remove(&id);
        if self.map.is_empty() {
            self.max = 0;
        }
        removed
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The ids in the map with their values, sorted.
    fn contents(map: &StreamMap<u32>) -> Vec<(u32, u32)> {
        let mut all: Vec<_> = map.iter().map(|(id, v)| (id, *v)).collect();
        all.sort_unstable();
        all
    }

    #[test]
    fn values_are_found_in_their_place_or_displaced() {
        let mut map = StreamMap::default();
        assert_eq!(map.get(1), None);
        assert_eq!(map.remove(1), None);
        // Stream 1 stays open while the next ones come and go: every id 8
        // places on shares its place.
        map.insert(1, 100);
        for id in (3..200u32).step_by(2) {
            map.insert(id, id);
            assert_eq!(map.get(id), Some(&id));
            assert_eq!(map.get(1), Some(&100));
            assert_eq!(map.len(), 2);
            assert_eq!(map.remove(id), Some(id));
            assert_eq!(map.get(id), None);
            assert!(!map.contains_key(id));
        }
        assert_eq!(map.places.len(), FIRST_PLACES, "two at most: no growth");
        assert!(map.displaced.map.is_empty());
        // A newer value displaced by an older one, replaced while
        // displaced, found once the older one is gone, moved to its place
        // when put again, and replaced there.
        map.insert(17, 17);
        assert!(map.displaced.map.contains_key(&17));
        map.insert(17, 18);
        assert_eq!(map.len(), 2);
        assert_eq!(map.displaced.map.get(&17), Some(&18));
        assert_eq!(map.remove(1), Some(100));
        assert_eq!(map.get_mut(17), Some(&mut 18));
        assert_eq!(contents(&map), [(17, 18)]);
        map.insert(17, 19);
        assert_eq!(map.len(), 1);
        assert!(map.displaced.map.is_empty());
        assert_eq!(map.get(17), Some(&19));
        map.insert(17, 20);
        assert_eq!(map.len(), 1);
        assert_eq!(map.remove(17), Some(20));
        assert!(map.is_empty());
        assert_eq!(map.keys().count(), 0);
    }

    #[test]
    fn a_long_displaced_stream_leaves_newer_ones_their_places() {
        let mut map = StreamMap::default();
        map.insert(1, 1);
        map.insert(17, 17); // place 0, taken by 1: displaced
        assert_eq!(map.displaced.max, 17);
        // 1 and 17 stay; the streams after them come and go in their
        // places, the displaced table untouched, 17 still found.
        for id in (19..400u32).step_by(2) {
            map.insert(id, id);
            if map.displaced.map.len() > 1 {
                // The place held by 1 (every 8 ids): displaced too.
                assert!((id >> 1) % 8 == 0, "{id}");
                assert_eq!(map.remove(id), Some(id));
                continue;
            }
            assert_eq!(map.get(id), Some(&id));
            assert_eq!(map.remove(id), Some(id));
        }
        assert_eq!(map.get(17), Some(&17));
        assert_eq!(map.len(), 2);
        assert_eq!(map.displaced.map.len(), 1);
        assert_eq!(map.remove(17), Some(17));
        assert_eq!(map.displaced.max, 0, "none displaced");
        assert_eq!(map.get(1), Some(&1));
    }

    #[test]
    fn the_places_grow_with_the_values() {
        let mut map = StreamMap::default();
        let ids: Vec<u32> = (0..1000u32).map(|i| 2 * i + 1).collect();
        for &id in &ids {
            map.insert(id, id);
        }
        assert_eq!(map.len(), 1000);
        // 1000 consecutive ids in 1024 places: none displaced.
        assert_eq!(map.places.len(), 1024);
        assert!(map.displaced.map.is_empty());
        for &id in &ids {
            assert_eq!(map.get(id), Some(&id));
        }
        let expected: Vec<(u32, u32)> = ids.iter().map(|&id| (id, id)).collect();
        assert_eq!(contents(&map), expected);
        for value in map.values_mut() {
            *value += 1;
        }
        assert_eq!(map.get(999), Some(&1000));
        assert_eq!(map.values().count(), 1000);
        map.clear();
        assert!(map.is_empty());
        assert_eq!(map.get(1), None);
        assert!(contents(&map).is_empty());
    }

    #[test]
    fn ids_that_share_every_place_are_displaced_and_bounded() {
        // Ids that fall on one place whatever the number of places: the
        // places stop growing and the rest is displaced.
        let mut map = StreamMap::default();
        let stride = 2 * MAX_PLACES as u32;
        let ids: Vec<u32> = (0..100u32).map(|i| 1 + i * stride).collect();
        for &id in &ids {
            map.insert(id, id);
        }
        assert!(map.places.len() <= 256, "{}", map.places.len());
        assert_eq!(map.displaced.map.len(), 99);
        for &id in &ids {
            assert_eq!(map.get(id), Some(&id));
        }
        for &id in ids.iter().rev() {
            assert_eq!(map.remove(id), Some(id));
        }
        assert!(map.is_empty());
        // Up to the limit when the ids are many and spread.
        for i in 0..20_000u32 {
            map.insert(2 * i + 1, i);
        }
        assert_eq!(map.places.len(), MAX_PLACES);
        assert_eq!(map.displaced.map.len(), 20_000 - MAX_PLACES);
        assert_eq!(map.get(2 * 19_999 + 1), Some(&19_999));
    }

    #[test]
    fn trimming_gives_back_the_places_of_a_burst() {
        let mut map = StreamMap::default();
        for i in 0..5000u32 {
            map.insert(2 * i + 1, i);
        }
        assert_eq!(map.places(), MAX_PLACES);
        // A few stay open, among them some that share a place.
        for i in 0..5000u32 {
            if i % 1000 != 7 && i != 7 + 4096 {
                map.remove(2 * i + 1);
            }
        }
        map.trim();
        assert_eq!(map.places(), KEPT_PLACES);
        let mut left: Vec<(u32, u32)> = map.iter().map(|(id, v)| (id, *v)).collect();
        left.sort_unstable();
        let expected: Vec<(u32, u32)> = [7, 1007, 2007, 3007, 4007, 4103]
            .iter()
            .map(|&i| (2 * i + 1, i))
            .collect();
        assert_eq!(left, expected);
        for &(id, value) in &expected {
            assert_eq!(map.get(id), Some(&value));
        }
        // Many open again: the places they grew to stay.
        for i in 5000..6000u32 {
            map.insert(2 * i + 1, i);
        }
        let grown = map.places();
        assert!(grown >= 1006, "{grown}");
        map.trim();
        assert_eq!(map.len(), 1006);
        assert_eq!(map.places(), grown);
        for i in 5000..6000u32 {
            assert_eq!(map.get(2 * i + 1), Some(&i));
        }
        // Nothing left: the places a connection keeps.
        for &(id, _) in &expected {
            map.remove(id);
        }
        for i in 5000..6000u32 {
            map.remove(2 * i + 1);
        }
        map.trim();
        assert!(map.is_empty());
        assert_eq!(map.places(), KEPT_PLACES);
        assert!(map.displaced.map.capacity() <= KEPT_PLACES);
    }
}
