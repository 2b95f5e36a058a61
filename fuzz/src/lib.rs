//! Pieces shared by the fuzz targets: a reader for the control bytes at the
//! front of an input, a way to call code that may panic without the fuzzer
//! counting it as a crash, the service the connection target routes to, and
//! a checker for the bytes the server writes.

pub mod echo;
pub mod peer;

use std::cell::Cell;
use std::panic::{self, AssertUnwindSafe};
use std::sync::{Once, OnceLock};

/// Reads an input front to back; past the end every read yields zeros or
/// empty slices, so any input is a valid one.
pub struct Input<'a> {
    data: &'a [u8],
}

impl<'a> Input<'a> {
    /// A reader over `data`.
    pub fn new(data: &'a [u8]) -> Input<'a> {
        Input { data }
    }

    /// Whether every byte was read.
    pub fn is_empty(&self) -> bool {
        self.data.is_empty()
    }

    /// The next byte, or 0.
    pub fn byte(&mut self) -> u8 {
        match self.data.split_first() {
            Some((&b, rest)) => {
                self.data = rest;
                b
            }
            None => 0,
        }
    }

    /// The next two bytes as a little-endian number.
    pub fn u16(&mut self) -> u16 {
        u16::from(self.byte()) | u16::from(self.byte()) << 8
    }

    /// The next `n` bytes, or as many as are left.
    pub fn take(&mut self, n: usize) -> &'a [u8] {
        let (head, rest) = self.data.split_at(n.min(self.data.len()));
        self.data = rest;
        head
    }

    /// A length-prefixed chunk: one length byte, or 255 followed by a
    /// two-byte length, then that many bytes (fewer at the end).
    pub fn chunk(&mut self) -> &'a [u8] {
        let len = match self.byte() {
            255 => usize::from(self.u16()),
            n => usize::from(n),
        };
        self.take(len)
    }

    /// Everything not read yet.
    pub fn rest(self) -> &'a [u8] {
        self.data
    }
}

/// Whether `PAJAMAX_FUZZ_TRACE` is set: the targets then print what they
/// see, to follow what one input does when it is run alone.
pub fn trace_enabled() -> bool {
    static TRACE: OnceLock<bool> = OnceLock::new();
    *TRACE.get_or_init(|| std::env::var_os("PAJAMAX_FUZZ_TRACE").is_some())
}

thread_local! {
    /// Set while a panic is expected: the next panic skips the hook that
    /// libFuzzer installs (which aborts) and unwinds to the `catch_unwind`
    /// of `catch_quietly`.
    static EXPECTING_PANIC: Cell<bool> = const { Cell::new(false) };
}

fn install_hook() {
    static HOOK: Once = Once::new();
    HOOK.call_once(|| {
        let aborting = panic::take_hook();
        panic::set_hook(Box::new(move |info| {
            if !EXPECTING_PANIC.with(|flag| flag.replace(false)) {
                aborting(info);
            }
        }));
    });
}

/// Runs `f`, returning `None` if it panicked. For code whose panics are not
/// the subject of the test (a reference implementation).
pub fn catch_quietly<R>(f: impl FnOnce() -> R) -> Option<R> {
    install_hook();
    EXPECTING_PANIC.with(|flag| flag.set(true));
    let result = panic::catch_unwind(AssertUnwindSafe(f));
    EXPECTING_PANIC.with(|flag| flag.set(false));
    result.ok()
}

/// Panics without the fuzzer treating it as a crash, for code under test
/// that is expected to catch the panic. `resume_unwind` skips the panic
/// hook; if nothing catches the unwind, libFuzzer's own `catch_unwind`
/// aborts and the input is reported.
pub fn panic_quietly(message: &'static str) -> ! {
    panic::resume_unwind(Box::new(message))
}
