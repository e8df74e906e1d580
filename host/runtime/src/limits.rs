//! What one processor call may use, and the store limiter that enforces it.

use std::time::Duration;

use serde::Serialize;
use wasmtime::ResourceLimiter;

/// Limits on one processor call. The defaults are safe for processors from
/// strangers; raise them per processor when a trusted one needs more.
///
/// ```
/// use std::time::Duration;
/// use agent_host_runtime::Limits;
///
/// let limits = Limits {
///     deadline: Duration::from_secs(1),
///     ..Limits::default()
/// };
/// assert_eq!(limits.memory_bytes, 64 << 20);
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Limits {
    /// Linear memory, summed over the component's memories (default 64 MiB).
    pub memory_bytes: usize,
    /// Table elements per table (default 100,000).
    pub table_elements: usize,
    /// Core instances, tables and memories a component may create (default 50 each).
    pub instances: usize,
    /// Wall-clock time for one call, instantiation included, and for the
    /// host's checks of its answer (applying, validating, repairing): both
    /// must be done this long after the call started (default 250 ms).
    pub deadline: Duration,
    /// Items in an answer (default 1,000,000).
    pub max_items: usize,
    /// Bytes of the new messages of an answer as the host stores them (JSON
    /// lines): every field counts, text, ids, tool calls, media sources and
    /// metadata (default 32 MiB).
    pub max_output_bytes: usize,
    /// Log lines kept per call (default 1,000); more are counted, not kept.
    pub max_log_lines: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            memory_bytes: 64 << 20,
            table_elements: 100_000,
            instances: 50,
            deadline: Duration::from_millis(250),
            max_items: 1_000_000,
            max_output_bytes: 32 << 20,
            max_log_lines: 1_000,
        }
    }
}

/// Enforces [`Limits`] on a store and remembers the peak memory and whether a
/// growth was refused, so that a trap can be explained.
pub(crate) struct Limiter {
    memory_cap: usize,
    table_cap: usize,
    instances: usize,
    /// Bytes of linear memory in use, summed over memories, at its highest.
    pub(crate) peak_memory: usize,
    current_memory: usize,
    /// The size a refused memory growth asked for.
    pub(crate) refused_memory: Option<usize>,
    /// The size a refused table growth asked for.
    pub(crate) refused_table: Option<usize>,
}

impl Limiter {
    pub(crate) fn new(limits: &Limits) -> Self {
        Limiter {
            memory_cap: limits.memory_bytes,
            table_cap: limits.table_elements,
            instances: limits.instances,
            peak_memory: 0,
            current_memory: 0,
            refused_memory: None,
            refused_table: None,
        }
    }
}

impl ResourceLimiter for Limiter {
    fn memory_growing(
        &mut self,
        current: usize,
        desired: usize,
        maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        let total = self.current_memory - current.min(self.current_memory) + desired;
        if total > self.memory_cap || maximum.is_some_and(|m| desired > m) {
            self.refused_memory = Some(total);
            return Ok(false);
        }
        self.current_memory = total;
        self.peak_memory = self.peak_memory.max(total);
        Ok(true)
    }

    fn table_growing(
        &mut self,
        _current: usize,
        desired: usize,
        maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        if desired > self.table_cap || maximum.is_some_and(|m| desired > m) {
            self.refused_table = Some(desired);
            return Ok(false);
        }
        Ok(true)
    }

    fn instances(&self) -> usize {
        self.instances
    }

    fn tables(&self) -> usize {
        self.instances
    }

    fn memories(&self) -> usize {
        self.instances
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memory_is_capped_over_all_memories_and_the_peak_is_kept() {
        let mut l = Limiter::new(&Limits {
            memory_bytes: 100,
            ..Limits::default()
        });
        assert!(l.memory_growing(0, 60, None).unwrap());
        // A second memory: 60 + 30 fits, 60 + 50 does not.
        assert!(!l.memory_growing(0, 50, None).unwrap());
        assert_eq!(l.refused_memory, Some(110));
        assert_eq!(l.peak_memory, 60);
    }
}
