//! Flow-control window arithmetic (RFC 9113 section 6.9).

use crate::h2::frame::MAX_WINDOW;

/// A send window: may go negative after the peer lowers
/// SETTINGS_INITIAL_WINDOW_SIZE, and may never exceed 2^31 - 1. As the
/// initial size is at most 2^31 - 1 and only a positive window is spent,
/// it never goes below -(2^31 - 1): it fits an `i32`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Window(i32);

/// A window would exceed 2^31 - 1: a FLOW_CONTROL_ERROR.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WindowOverflow;

impl Window {
    /// A window of `size` bytes.
    pub fn new(size: u32) -> Window {
        Window(size.min(MAX_WINDOW) as i32)
    }

    /// Bytes that may be sent now (zero while negative).
    ///
    /// ```
    /// use pajamax::h2::window::Window;
    /// let mut w = Window::new(10);
    /// w.consume(4);
    /// assert_eq!(w.available(), 6);
    /// w.adjust(-20).unwrap();
    /// assert_eq!(w.available(), 0);
    /// ```
    pub fn available(self) -> usize {
        self.0.max(0) as usize
    }

    /// Takes `n` bytes that were sent.
    pub fn consume(&mut self, n: usize) {
        // At most what is available, which fits an i32.
        self.0 -= n as i32;
    }

    /// Applies a WINDOW_UPDATE increment or a change of the initial window.
    pub fn adjust(&mut self, delta: i64) -> Result<(), WindowOverflow> {
        let next = i64::from(self.0) + delta;
        if next > i64::from(MAX_WINDOW) {
            return Err(WindowOverflow);
        }
        self.0 = i32::try_from(next).map_err(|_| WindowOverflow)?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overflow_is_refused_and_leaves_the_window() {
        let mut w = Window::new(MAX_WINDOW - 1);
        assert_eq!(w.adjust(1), Ok(()));
        assert_eq!(w.adjust(1), Err(WindowOverflow));
        assert_eq!(w.available(), MAX_WINDOW as usize);
    }

    #[test]
    fn negative_windows_recover() {
        let mut w = Window::new(100);
        w.consume(100);
        w.adjust(-50).unwrap();
        assert_eq!(w.available(), 0);
        w.adjust(60).unwrap();
        assert_eq!(w.available(), 10);
    }
}
