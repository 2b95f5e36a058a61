//! A list of connection slots to serve, each listed at most once.

/// Connection slots waiting to be served, in the order they were listed;
/// listing a slot that is already listed does nothing, and a slot can be
/// struck off (when it is served out of turn) in constant time, so a worker
/// with many connections never scans the list.
#[derive(Debug, Default)]
pub(crate) struct SlotList {
    /// Listed slots, in order; struck-off ones stay until the next drain.
    order: Vec<usize>,
    /// Whether each slot is listed now.
    listed: Vec<bool>,
}

impl SlotList {
    /// Lists `slot`; returns `false` when it was listed already.
    pub(crate) fn push(&mut self, slot: usize) -> bool {
        if slot >= self.listed.len() {
            self.listed.resize(slot + 1, false);
        }
        if self.listed[slot] {
            return false;
        }
        self.listed[slot] = true;
        self.order.push(slot);
        true
    }

    /// Strikes `slot` off; returns whether it was listed.
    pub(crate) fn strike(&mut self, slot: usize) -> bool {
        match self.listed.get_mut(slot) {
            Some(listed) => std::mem::replace(listed, false),
            None => false,
        }
    }

    /// Whether no slot was listed since the last drain. (Struck-off slots
    /// count until then: the list may say "not empty" with none listed.)
    pub(crate) fn is_empty(&self) -> bool {
        self.order.is_empty()
    }

    /// Takes the first listed slot off the list, in order.
    pub(crate) fn pop_front(&mut self, from: &mut usize) -> Option<usize> {
        while let Some(&slot) = self.order.get(*from) {
            *from += 1;
            if self.strike(slot) {
                return Some(slot);
            }
        }
        self.order.clear();
        *from = 0;
        None
    }

    /// Moves every listed slot of `self` to the end of `other`, in order
    /// (skipping those `other` lists already), leaving `self` empty.
    pub(crate) fn move_to(&mut self, other: &mut SlotList) {
        for i in 0..self.order.len() {
            let slot = self.order[i];
            if self.strike(slot) {
                other.push(slot);
            }
        }
        self.order.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn drain(list: &mut SlotList) -> Vec<usize> {
        let mut from = 0;
        std::iter::from_fn(|| list.pop_front(&mut from)).collect()
    }

    #[test]
    fn each_slot_once_in_order() {
        let mut list = SlotList::default();
        assert!(list.is_empty());
        assert!(list.push(5));
        assert!(list.push(2));
        assert!(!list.push(5));
        assert!(list.push(9));
        assert_eq!(drain(&mut list), vec![5, 2, 9]);
        assert!(list.is_empty());
        // Listed again after a drain.
        assert!(list.push(2));
        assert_eq!(drain(&mut list), vec![2]);
    }

    #[test]
    fn struck_slots_are_skipped_and_may_come_back() {
        let mut list = SlotList::default();
        for slot in [1, 3, 4] {
            list.push(slot);
        }
        assert!(list.strike(3));
        assert!(!list.strike(3));
        assert!(!list.strike(100));
        list.push(7);
        assert_eq!(drain(&mut list), vec![1, 4, 7]);
        list.push(3);
        list.strike(3);
        list.push(3);
        assert_eq!(drain(&mut list), vec![3]);
    }

    #[test]
    fn slots_listed_while_draining_are_served_in_the_same_drain() {
        let mut list = SlotList::default();
        list.push(1);
        let mut from = 0;
        assert_eq!(list.pop_front(&mut from), Some(1));
        list.push(2);
        list.push(1);
        assert_eq!(list.pop_front(&mut from), Some(2));
        assert_eq!(list.pop_front(&mut from), Some(1));
        assert_eq!(list.pop_front(&mut from), None);
    }

    #[test]
    fn moving_keeps_order_and_merges() {
        let mut next = SlotList::default();
        let mut now = SlotList::default();
        now.push(4);
        next.push(1);
        next.push(4);
        next.push(2);
        next.strike(2);
        next.move_to(&mut now);
        assert!(next.is_empty());
        assert_eq!(drain(&mut now), vec![4, 1]);
        // A moved slot can be listed in `next` again at once.
        assert!(next.push(1));
    }
}
