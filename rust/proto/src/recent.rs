// SPDX-License-Identifier: GPL-2.0 OR MIT

//! A fixed-size memory of the newest items: the responder's record of the
//! reads and atomics it served, so that a duplicate request is answered
//! again without being executed again. One type serves the responder
//! model ([`crate::responder`]), [`crate::resp::ReadResources`] and the
//! driver's atomic replay.

/// The newest items remembered, at most `N`, oldest forgotten first.
///
/// Storage is a ring of `N` slots; `head` is the oldest held item and
/// `len` counts the held ones, so no slot ever needs an "unused" marker.
pub struct Recent<T: Copy, const N: usize> {
    items: [T; N],
    head: usize,
    len: usize,
}

impl<T: Copy, const N: usize> Recent<T, N> {
    /// Nothing held; every slot starts as `fill`, which is never read.
    pub const fn new(fill: T) -> Self {
        Recent {
            items: [fill; N],
            head: 0,
            len: 0,
        }
    }

    /// Forgets everything.
    pub fn clear(&mut self) {
        self.head = 0;
        self.len = 0;
    }

    /// How many items are held.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether none is held.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Remembers `item`, forgetting the oldest so that no more than
    /// `limit` are held; `limit` is taken as at least one and at most `N`
    /// (with `N == 0` nothing is ever held).
    pub fn remember(&mut self, item: T, limit: usize) {
        if N == 0 {
            return;
        }
        let limit = limit.clamp(1, N);
        while self.len >= limit {
            self.head = (self.head + 1) % N;
            self.len -= 1;
        }
        self.items[(self.head + self.len) % N] = item;
        self.len += 1;
    }

    /// The held items, newest first.
    pub fn newest_first(&self) -> impl Iterator<Item = &T> + '_ {
        (0..self.len)
            .rev()
            .map(move |i| &self.items[(self.head + i) % N])
    }

    /// The newest held item for which `pred` holds.
    pub fn find(&self, mut pred: impl FnMut(&T) -> bool) -> Option<T> {
        self.newest_first().find(|t| pred(t)).copied()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::VecDeque;
    use std::vec::Vec;

    #[test]
    fn holds_the_newest_up_to_the_limit() {
        let mut r = Recent::<u32, 4>::new(0);
        assert!(r.is_empty() && r.find(|_| true).is_none());
        for i in 1..=3 {
            r.remember(i, 2);
        }
        assert_eq!(r.newest_first().copied().collect::<Vec<_>>(), [3, 2]);
        for i in 4..=9 {
            r.remember(i, 100);
        }
        assert_eq!(r.len(), 4);
        assert_eq!(r.newest_first().copied().collect::<Vec<_>>(), [9, 8, 7, 6]);
        // Zero is taken as one.
        r.remember(10, 0);
        assert_eq!(r.newest_first().copied().collect::<Vec<_>>(), [10]);
        r.clear();
        assert!(r.is_empty());
        // No slots: nothing is held.
        let mut z = Recent::<u32, 0>::new(0);
        z.remember(1, 1);
        assert!(z.is_empty());
    }

    #[test]
    fn the_newest_match_wins() {
        let mut r = Recent::<(u32, u32), 4>::new((0, 0));
        r.remember((1, 10), 4);
        r.remember((1, 20), 4);
        r.remember((2, 30), 4);
        assert_eq!(r.find(|&(k, _)| k == 1), Some((1, 20)));
        assert_eq!(r.find(|&(k, _)| k == 3), None);
    }

    proptest! {
        /// Against a model: a deque trimmed to the limit after each push.
        #[test]
        fn matches_a_deque(ops in proptest::collection::vec((any::<u16>(), 0usize..10), 0..200)) {
            let mut r = Recent::<u16, 6>::new(0);
            let mut model = VecDeque::new();
            for (item, limit) in ops {
                r.remember(item, limit);
                let limit = limit.clamp(1, 6);
                model.push_back(item);
                while model.len() > limit {
                    model.pop_front();
                }
                let got: Vec<u16> = r.newest_first().copied().collect();
                let want: Vec<u16> = model.iter().rev().copied().collect();
                prop_assert_eq!(got, want);
            }
        }
    }
}
