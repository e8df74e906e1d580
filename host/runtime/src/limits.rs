//! What one processor call may use, and the store limiter that enforces it.
//!
//! Every limit wasmtime applies to a guest is set here, explicitly, by a
//! named constant: the per-call [`Limits`] (their defaults), the store-wide
//! caps every call gets, and the engine's wasm stack. A new wasmtime with
//! other defaults changes none of them.

use std::time::Duration;

use serde::{Deserialize, Serialize};
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
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
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
    /// What the host services granted to the processor may spend in one
    /// run (calls, model tokens, time); the time spent in them is not
    /// counted against `deadline`.
    pub services: crate::ServiceBudget,
}

/// Linear memory of one call: ample for a processor holding a long history
/// twice over (input and answer), small enough that a hundred calls at once
/// fit in a server's memory.
pub const DEFAULT_MEMORY_BYTES: usize = 64 << 20;
/// Elements per table: a large Rust or C guest has a few thousand functions
/// in its table (a debug C# one over 10,000); far more is a guest growing
/// tables to use up host memory.
pub const DEFAULT_TABLE_ELEMENTS: usize = 100_000;
/// Core instances, tables and memories of one component: a component made by
/// `wit-component` with a WASI adapter has fewer than ten; more is a guest
/// that instantiates to exhaust host memory.
pub const DEFAULT_INSTANCES: usize = 50;
/// Wall-clock time of one call: processors run between a user's message and
/// the model's request, so a slow one is felt at once; the standard ones take
/// a few milliseconds on long histories.
pub const DEFAULT_DEADLINE: Duration = Duration::from_millis(250);
/// Items in an answer: one per message of a history far longer than any
/// context window.
pub const DEFAULT_MAX_ITEMS: usize = 1_000_000;
/// Bytes of new text in an answer: more than any context window holds.
pub const DEFAULT_MAX_OUTPUT_BYTES: usize = 32 << 20;
/// Log lines kept per call: enough to debug a processor, bounded so that a
/// guest logging in a loop cannot fill the host's memory.
pub const DEFAULT_MAX_LOG_LINES: usize = 1_000;

/// The longest name or version a processor may describe itself with: they
/// are labels in reports and terminals, not documents.
pub const MAX_DESCRIBE_LABEL: usize = 256;
/// The longest summary, configuration schema or example in `describe()`:
/// far more than any real one (the standard processors' schemas are under
/// 2 KiB), small enough that printing one (`processor inspect`) stays small.
pub const MAX_DESCRIBE_TEXT: usize = 64 << 10;

/// The largest component accepted: real processors are far smaller (the
/// Rust ones well under 1 MiB, a componentize-py one with its interpreter
/// about 18 MiB), and the cap bounds what compiling can cost before the
/// compile limits below apply.
pub const DEFAULT_MAX_COMPONENT_BYTES: usize = 32 << 20;

/// Wall-clock time to compile one component in the compile child: real
/// processors compile in well under 10 s (a componentize-py one, the
/// largest, in a few), while a hostile one of a few hundred kilobytes has
/// been seen to take minutes.
pub const DEFAULT_COMPILE_TIMEOUT: Duration = Duration::from_secs(60);

/// Address space of the compile child (`RLIMIT_AS`): room for the host
/// binary, its threads and Cranelift compiling a large real component,
/// while a hostile one, seen to need 2.7 GiB, is stopped before it can
/// starve the machine.
pub const DEFAULT_COMPILE_MEMORY_BYTES: u64 = 2 << 30;

/// The wasm stack of every call: deep enough for recursive parsers in real
/// processors, and with room to spare under the 2 MiB native stack of the
/// threads calls run on (tokio's blocking pool), which wasm shares with the
/// host frames below it.
pub const DEFAULT_MAX_WASM_STACK: usize = 1 << 20;

/// The most bytes a guest may hand the host in one host call or one answer
/// (wasmtime's "hostcall fuel", counted as strings and lists are lifted):
/// wasmtime's default, set here so that it cannot change under us; it
/// bounds what the host allocates to lift one answer before the answer
/// limits of [`Limits`] are checked.
pub(crate) const HOSTCALL_FUEL: usize = 128 << 20;

/// Component-model handles alive at once in one call's store: processors
/// use a handful (WASI streams and pollables); the cap stops a guest that
/// creates resources in a loop without the host in it.
pub(crate) const MAX_COMPONENT_HANDLES: usize = 10_000;

/// Entries in the host's resource table of one call (WASI streams, pollables,
/// open files): the same reasoning and bound as [`MAX_COMPONENT_HANDLES`].
pub(crate) const RESOURCE_TABLE_CAPACITY: usize = 10_000;

/// The most random bytes one WASI call may ask for (when random is
/// granted): a guest wanting more asks again, and a single request cannot
/// make the host allocate gigabytes.
pub(crate) const MAX_RANDOM_BYTES: u64 = 1 << 20;

/// Wasm frames kept in a trap's backtrace: enough to find the failing
/// function in a report, few enough that a trap deep in a recursion keeps
/// its error message short.
pub(crate) const WASM_BACKTRACE_FRAMES: usize = 20;

impl Default for Limits {
    fn default() -> Self {
        Limits {
            memory_bytes: DEFAULT_MEMORY_BYTES,
            table_elements: DEFAULT_TABLE_ELEMENTS,
            instances: DEFAULT_INSTANCES,
            deadline: DEFAULT_DEADLINE,
            max_items: DEFAULT_MAX_ITEMS,
            max_output_bytes: DEFAULT_MAX_OUTPUT_BYTES,
            max_log_lines: DEFAULT_MAX_LOG_LINES,
            services: crate::ServiceBudget::default(),
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
