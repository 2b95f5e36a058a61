//! The calls of a connection that wait for their request body as a light
//! record ([`Waiting`]), found through the tag the codec keeps on their
//! stream: no table keyed by stream id of their own.

use crate::grpc::call::Waiting;

/// Waiting calls in numbered places; a call's tag (its place plus one) is
/// kept on its h2 stream ([`Connection::set_tag`](crate::h2::Connection::set_tag)).
/// Each place also holds its stream id, so a tag that outlived its call can
/// never reach another one.
#[derive(Debug, Default)]
pub(crate) struct WaitingCalls {
    places: Vec<Option<(u32, Waiting)>>,
    /// Empty places, the most recently emptied last.
    free: Vec<u32>,
    len: usize,
}

/// Past this many places, a table with no call left gives its room back.
const KEPT_PLACES: usize = 256;

impl WaitingCalls {
    /// How many calls wait.
    #[inline]
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    #[inline]
    pub(crate) fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Whether a waiting call has a deadline.
    pub(crate) fn any_deadline(&self) -> bool {
        self.places
            .iter()
            .flatten()
            .any(|(_, waiting)| waiting.has_deadline())
    }

    /// Keeps `waiting`, the call on `stream`; returns its tag (never 0).
    #[inline]
    pub(crate) fn insert(&mut self, stream: u32, waiting: Waiting) -> u32 {
        self.len += 1;
        match self.free.pop() {
            Some(place) => {
                self.places[place as usize] = Some((stream, waiting));
                place + 1
            }
            None => {
                self.places.push(Some((stream, waiting)));
                self.places.len() as u32
            }
        }
    }

    /// The call on `stream` with tag `tag`, if it waits.
    pub(crate) fn get(&self, tag: u32, stream: u32) -> Option<&Waiting> {
        match self.places.get((tag as usize).wrapping_sub(1))? {
            Some((of, waiting)) if *of == stream => Some(waiting),
            _ => None,
        }
    }

    /// Takes the call on `stream` with tag `tag` out, if it waits.
    #[inline]
    pub(crate) fn take(&mut self, tag: u32, stream: u32) -> Option<Waiting> {
        let place = (tag as usize).wrapping_sub(1);
        let slot = self.places.get_mut(place)?;
        if !matches!(slot, Some((of, _)) if *of == stream) {
            return None;
        }
        let (_, waiting) = slot.take()?;
        self.len -= 1;
        self.free.push(place as u32);
        if self.len == 0 && self.places.len() > KEPT_PLACES {
            self.give_back();
        }
        Some(waiting)
    }

    /// Drops the room of a table with no call left.
    #[cold]
    fn give_back(&mut self) {
        *self = WaitingCalls::default();
    }

    /// Takes every waiting call out, with its stream.
    pub(crate) fn take_all(&mut self) -> Vec<(u32, Waiting)> {
        let all = self.places.drain(..).flatten().collect();
        *self = WaitingCalls::default();
        all
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::grpc::call::SharedHead;
    use crate::grpc::compression::Encoding;
    use crate::grpc::metadata::Metadata;
    use crate::grpc::router::Route;
    use crate::grpc::service::MethodKind;
    use std::rc::Rc;
    use std::time::{Duration, Instant};

    fn waiting(epoch: Instant, after_ms: u64) -> Waiting {
        let head = Rc::new(SharedHead {
            block_id: 1,
            route: Route {
                service: 0,
                method: 0,
                kind: MethodKind::Unary,
            },
            timeout: None,
            asked_timeout: None,
            encoding: Encoding::Identity,
            answer_compression: Encoding::Identity,
            metadata: Metadata::default(),
        });
        Waiting::new(head, Some(epoch + Duration::from_millis(after_ms)), epoch)
    }

    #[test]
    fn a_tag_finds_its_own_call_only() {
        let epoch = Instant::now();
        let mut calls = WaitingCalls::default();
        let a = calls.insert(1, waiting(epoch, 1));
        let b = calls.insert(3, waiting(epoch, 3));
        assert_ne!(a, 0);
        assert_ne!(a, b);
        assert_eq!(calls.len(), 2);
        assert!(calls.get(a, 3).is_none(), "another stream's tag");
        assert!(calls.get(0, 1).is_none());
        assert!(calls.get(99, 1).is_none());
        let deadline = calls.get(b, 3).unwrap().deadline(epoch).unwrap();
        assert_eq!(deadline, epoch + Duration::from_millis(3));
        let taken = calls.take(a, 1).unwrap();
        assert_eq!(
            taken.deadline(epoch),
            Some(epoch + Duration::from_millis(1))
        );
        assert!(calls.take(a, 1).is_none(), "taken once");
        // The place is used again; the old tag cannot reach the new call.
        let c = calls.insert(5, waiting(epoch, 5));
        assert_eq!(c, a);
        assert!(calls.get(a, 1).is_none());
        assert!(calls.get(c, 5).is_some());
        assert_eq!(calls.len(), 2);
        let mut all = calls.take_all();
        all.sort_by_key(|(stream, _)| *stream);
        let streams: Vec<u32> = all.iter().map(|(stream, _)| *stream).collect();
        assert_eq!(streams, vec![3, 5]);
        assert!(calls.is_empty());
    }

    #[test]
    fn an_emptied_table_of_many_places_gives_its_room_back() {
        let epoch = Instant::now();
        let mut calls = WaitingCalls::default();
        let tags: Vec<u32> = (0..1000)
            .map(|i| calls.insert(1 + 2 * i, waiting(epoch, 1)))
            .collect();
        for (i, tag) in tags.iter().enumerate() {
            assert!(calls.take(*tag, 1 + 2 * i as u32).is_some());
        }
        assert!(calls.is_empty());
        assert_eq!(calls.places.capacity(), 0);
        assert_eq!(calls.insert(7, waiting(epoch, 1)), 1);
    }
}
