//! Finding, among the events of one read, the body that ends a request
//! opened in the same read, so the call runs at once instead of waiting for
//! it in a table.
//!
//! Clients that open many streams at once often send every stream's HEADERS
//! first and the DATA frames after them (nghttp2 does), so a request's body
//! is rarely the very next event. [`BodiesAhead`] looks past the requests
//! that follow; it only moves forward, so a read of n events costs O(n)
//! however they are ordered. The price of that: an event the cursor stops
//! at and cannot pass (another stream's body, a body that is not one whole
//! message, a reset) leaves the requests before it to wait in the table,
//! as every request did before.

use crate::h2::connection::Event;
use std::ops::Range;

/// A forward cursor over one read's events.
///
/// Invariant: every `Data` event before `next` (and after the request being
/// handled) has been taken by the request it ends; every other event there
/// is a `Request`. So the caller skips a `Data` event exactly when its index
/// is below [`BodiesAhead::next`].
#[derive(Debug, Default)]
pub(crate) struct BodiesAhead {
    next: usize,
}

impl BodiesAhead {
    /// The body of the request that the event at `at` opened on `stream`:
    /// the first event after `at` that is not a request, if it is `stream`'s
    /// last DATA. `None` otherwise; the cursor then stays on that event, so
    /// the requests passed over are not looked at again.
    #[inline]
    pub(crate) fn find(
        &mut self,
        events: &[Event],
        at: usize,
        stream: u32,
    ) -> Option<Range<usize>> {
        let mut i = self.next.max(at + 1);
        while let Some(Event::Request { .. }) = events.get(i) {
            i += 1;
        }
        self.next = i;
        match events.get(i) {
            Some(Event::Data {
                stream: of,
                data,
                end_stream: true,
            }) if *of == stream => Some(data.clone()),
            _ => None,
        }
    }

    /// Takes the body [`BodiesAhead::find`] just found: its event is to be
    /// skipped when it comes.
    #[inline]
    pub(crate) fn take(&mut self) {
        self.next += 1;
    }

    /// Whether the `Data` event at `at` was taken ahead by its request.
    #[inline]
    pub(crate) fn taken(&self, at: usize) -> bool {
        at < self.next
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(stream: u32) -> Event {
        Event::Request {
            stream,
            fields: 0..0,
            end_stream: false,
            too_large: false,
            block_id: 0,
        }
    }

    fn data(stream: u32, end_stream: bool) -> Event {
        Event::Data {
            stream,
            data: stream as usize..stream as usize + 10,
            end_stream,
        }
    }

    /// Walks `events` as the connection does, taking every body found and
    /// returning (request stream, body) pairs and the events left over.
    fn walk(events: &[Event]) -> (Vec<(u32, Range<usize>)>, Vec<usize>) {
        let mut bodies = BodiesAhead::default();
        let (mut found, mut left) = (Vec::new(), Vec::new());
        for (at, event) in events.iter().enumerate() {
            match event {
                Event::Request { stream, .. } => {
                    if let Some(body) = bodies.find(events, at, *stream) {
                        bodies.take();
                        found.push((*stream, body));
                    }
                }
                Event::Data { .. } if bodies.taken(at) => {}
                _ => left.push(at),
            }
        }
        (found, left)
    }

    #[test]
    fn bodies_after_all_the_heads_are_found_in_one_pass() {
        let events = [
            request(1),
            request(3),
            request(5),
            data(1, true),
            data(3, true),
            data(5, true),
        ];
        let (found, left) = walk(&events);
        assert_eq!(found, vec![(1, 1..11), (3, 3..13), (5, 5..15)]);
        assert!(left.is_empty());
    }

    #[test]
    fn interleaved_heads_and_bodies_are_found() {
        let events = [request(1), data(1, true), request(3), data(3, true)];
        let (found, left) = walk(&events);
        assert_eq!(found, vec![(1, 1..11), (3, 3..13)]);
        assert!(left.is_empty());
    }

    #[test]
    fn a_body_that_does_not_end_its_request_is_left_with_what_follows() {
        let events = [
            request(1),
            request(3),
            data(1, false),
            data(3, true),
            data(1, true),
        ];
        let (found, left) = walk(&events);
        // Stream 1's first DATA does not end it: neither it nor anything
        // after it is taken, so the order of stream 1's bytes holds.
        assert_eq!(found, vec![]);
        assert_eq!(left, vec![2, 3, 4]);
    }

    #[test]
    fn bodies_in_another_order_are_left_in_place() {
        let events = [request(1), request(3), data(3, true), data(1, true)];
        let (found, left) = walk(&events);
        // Stream 3's body is the next one when stream 3 looks; stream 1's
        // is not where stream 1 looked.
        assert_eq!(found, vec![(3, 3..13)]);
        assert_eq!(left, vec![3]);
    }

    #[test]
    fn a_reset_between_stops_the_search() {
        let events = [
            request(1),
            Event::Reset { stream: 7, tag: 0 },
            data(1, true),
        ];
        let (found, left) = walk(&events);
        assert_eq!(found, vec![]);
        assert_eq!(left, vec![1, 2]);
    }

    #[test]
    fn a_request_without_a_body_ahead_finds_none() {
        let events = [request(1), request(3)];
        let (found, left) = walk(&events);
        assert!(found.is_empty());
        assert!(left.is_empty());
    }
}
