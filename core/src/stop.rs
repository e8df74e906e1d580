//! Stopping a long pass over a history from outside.
//!
//! Core keeps no clock, so a caller with a deadline (the processor runtime,
//! which checks a processor's answer within the time the processor was
//! given) passes a [`StopCheck`] wrapping its own test; passes such as
//! [`crate::validate::validate_until`] and [`crate::repair::repair_until`]
//! call it as they go and give up with [`Stopped`] once it says so.

/// The error of a pass given up because its caller's check said stop.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("the caller stopped the pass over the history before it finished")]
pub struct Stopped;

/// How many steps pass between two calls of the caller's test: a step is a
/// message or a tool call, so a test that reads a clock costs nothing
/// noticeable and a pass still stops within microseconds of being told.
const STRIDE: u32 = 1024;

/// A caller's test of whether to give up, asked every so many steps.
///
/// ```
/// use std::cell::Cell;
/// use agent_host_core::stop::{StopCheck, Stopped};
///
/// let asked = Cell::new(0);
/// let test = || {
///     asked.set(asked.get() + 1);
///     true
/// };
/// let mut check = StopCheck::new(&test);
/// assert_eq!(check.step(), Err(Stopped), "the first step asks");
/// assert_eq!(asked.get(), 1);
/// assert_eq!(StopCheck::never().step(), Ok(()));
/// ```
pub struct StopCheck<'a> {
    test: &'a dyn Fn() -> bool,
    /// Steps left before the test is asked again.
    left: u32,
}

impl<'a> StopCheck<'a> {
    /// A check that asks `test` at the first step and then every 1,024
    /// steps; `test` returns `true` to stop.
    pub fn new(test: &'a dyn Fn() -> bool) -> Self {
        StopCheck { test, left: 0 }
    }

    /// A check that never stops.
    pub fn never() -> StopCheck<'static> {
        StopCheck {
            test: &|| false,
            left: u32::MAX,
        }
    }

    /// Counts one step; fails when the test, when asked, says stop.
    pub fn step(&mut self) -> Result<(), Stopped> {
        if self.left > 0 {
            self.left -= 1;
            return Ok(());
        }
        self.left = STRIDE - 1;
        if (self.test)() {
            return Err(Stopped);
        }
        Ok(())
    }

    /// Counts `n` steps at once (a message with `n` tool calls).
    pub fn steps(&mut self, n: usize) -> Result<(), Stopped> {
        let n = u32::try_from(n).unwrap_or(u32::MAX);
        if self.left >= n {
            self.left -= n;
            return Ok(());
        }
        self.left = 0;
        self.step()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;

    #[test]
    fn the_test_is_asked_once_per_stride() {
        let asked = Cell::new(0u32);
        let test = || {
            asked.set(asked.get() + 1);
            false
        };
        let mut check = StopCheck::new(&test);
        for _ in 0..STRIDE * 3 {
            check.step().unwrap();
        }
        assert_eq!(asked.get(), 3);
        check.steps(10 * STRIDE as usize).unwrap();
        assert_eq!(asked.get(), 4, "a big batch asks at once");
    }
}
