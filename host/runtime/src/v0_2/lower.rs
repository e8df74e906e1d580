//! Results of the 0.2.0 `history` methods written into the guest without
//! copies on the host's side.
//!
//! `bindgen!`'s host functions return owned values: every string a guest
//! reads through `messages`, `message`, `contents` or `content` was cloned
//! out of the host's history first, then copied into the guest, then freed
//! (0.1.0 lowers borrowed strings straight from the history). Here those
//! results hold a share of the history ([`HistoryData`]'s messages are an
//! `Arc` for the call) and lower the borrowed records of
//! [`bindings::MessageIn`], as 0.1.0 does: one copy per string read.
//!
//! Headers: `bindgen!` lowers a `list<header>` field by field: each of a header's
//! dozen fields (and each option's discriminant) is a separate store, and
//! each store looks the guest's memory up again. At 100 messages that was
//! most of the host's share of a structural processor's call (a profile of
//! `cargo bench -p agent-host --bench call`: 15 µs of about 48). A header
//! holds no string, so the whole list is one block of fixed-size records:
//! here it is written straight into the guest's allocation as the canonical
//! ABI lays it out, with one look-up of the guest's memory. The host function is
//! registered over the generated one ([`shadow`]); the layout is tested
//! against the generated `Header` type's own, and `tests/reads.rs` checks
//! every field a guest reads through each method.
//!
//! [`bindings::MessageIn`]: crate::bindings::MessageIn

use std::ops::Range;
use std::sync::Arc;

use agent_host_core::{Message, TokenCounter};
use wasmtime::component::__internal::{
    CanonicalAbiInfo, InstanceType, InterfaceType, LowerContext,
};
use wasmtime::component::{ComponentType, Linker, Lower, Resource};
use wasmtime::{StoreContextMut, ValRaw, map_maybe_uninit};

use super::{HistoryData, wit};
use crate::bindings::{self, MessageIn};
use crate::call::State;

/// The import that carries the `history` resource's methods.
const TYPES_INTERFACE: &str = "agent-host:history/types@0.2.0";

/// Byte offsets of a `header` record's fields in guest memory, as the
/// canonical ABI places them (each field at its alignment; an option's
/// payload after its one-byte discriminant, at the payload's alignment).
/// `layout_matches_the_canonical_abi` checks them against wasmtime's own
/// computation from the generated types.
mod at {
    pub(super) const ROLE: usize = 0;
    pub(super) const FLAGS: usize = 1;
    pub(super) const TOKENS: usize = 4;
    /// `option<timestamp>`: `seconds` (s64) then `nanoseconds` (u32).
    pub(super) const TIMESTAMP: usize = 8;
    pub(super) const TIMESTAMP_SECONDS: usize = 16;
    pub(super) const TIMESTAMP_NANOS: usize = 24;
    /// `option<u32>`.
    pub(super) const ANSWERS: usize = 32;
    pub(super) const ANSWERS_VALUE: usize = 36;
    pub(super) const TOOL_CALLS: usize = 40;
    pub(super) const PARTS: usize = 44;
    pub(super) const CONTENT_BYTES: usize = 48;
    /// `option<u32>`.
    pub(super) const REASONING_BYTES: usize = 52;
    pub(super) const REASONING_BYTES_VALUE: usize = 56;
    pub(super) const METADATA_BYTES: usize = 60;
    /// `option<usage>`: two u64, then two `option<u64>`.
    pub(super) const USAGE: usize = 64;
    pub(super) const USAGE_INPUT: usize = 72;
    pub(super) const USAGE_OUTPUT: usize = 80;
    pub(super) const USAGE_CACHE_READ: usize = 88;
    pub(super) const USAGE_CACHE_READ_VALUE: usize = 96;
    pub(super) const USAGE_CACHE_WRITE: usize = 104;
    pub(super) const USAGE_CACHE_WRITE_VALUE: usize = 112;
    /// The record's size (a multiple of its alignment, 8).
    pub(super) const SIZE: usize = 120;
    pub(super) const ALIGN: u32 = 8;
}

/// A `list<header>` result, lowered in one copy.
pub(crate) struct HeaderList(pub(crate) Vec<wit::Header>);

// SAFETY: the type information is `list<header>`'s own (`[wit::Header]`,
// whose `Lower` is generated from the same WIT), and `lower` writes exactly
// that: a pointer and length to records laid out at `at::*` (checked
// against the generated type's ABI in the tests).
#[allow(unsafe_code)]
unsafe impl ComponentType for HeaderList {
    type Lower = <[wit::Header] as ComponentType>::Lower;

    const ABI: CanonicalAbiInfo = <[wit::Header] as ComponentType>::ABI;

    fn typecheck(ty: &InterfaceType, types: &InstanceType<'_>) -> wasmtime::Result<()> {
        <[wit::Header] as ComponentType>::typecheck(ty, types)
    }
}

// SAFETY: see `ComponentType` above; every write goes through a
// bounds-checked slice of the guest's memory.
#[allow(unsafe_code)]
unsafe impl Lower for HeaderList {
    fn linear_lower_to_flat<T>(
        &self,
        cx: &mut LowerContext<'_, T>,
        _ty: InterfaceType,
        dst: &mut std::mem::MaybeUninit<Self::Lower>,
    ) -> wasmtime::Result<()> {
        let (ptr, len) = self.store(cx)?;
        // Pointers are passed as 64-bit values whatever the memory's width.
        map_maybe_uninit!(dst[0]).write(ValRaw::i64(ptr as i64));
        map_maybe_uninit!(dst[1]).write(ValRaw::i64(len as i64));
        Ok(())
    }

    fn linear_lower_to_memory<T>(
        &self,
        cx: &mut LowerContext<'_, T>,
        _ty: InterfaceType,
        offset: usize,
    ) -> wasmtime::Result<()> {
        let (ptr, len) = self.store(cx)?;
        let pair = cx
            .as_slice_mut()
            .get_mut(offset..offset + 8)
            .ok_or_else(|| wasmtime::format_err!("the result pointer is out of bounds"))?;
        pair[..4].copy_from_slice(&u32::try_from(ptr)?.to_le_bytes());
        pair[4..].copy_from_slice(&u32::try_from(len)?.to_le_bytes());
        Ok(())
    }
}

impl HeaderList {
    /// Allocates the list in the guest and writes every record into it;
    /// gives its pointer and length.
    fn store<T>(&self, cx: &mut LowerContext<'_, T>) -> wasmtime::Result<(usize, usize)> {
        let size = self
            .0
            .len()
            .checked_mul(at::SIZE)
            .ok_or_else(|| wasmtime::format_err!("size overflow copying the headers"))?;
        let ptr = cx.realloc(0, 0, at::ALIGN, size)?;
        let block = cx
            .as_slice_mut()
            .get_mut(ptr..ptr + size)
            .ok_or_else(|| wasmtime::format_err!("the guest's allocation is out of bounds"))?;
        // The guest's allocator may hand back used memory: zero it first.
        block.fill(0);
        for (header, out) in self.0.iter().zip(block.chunks_exact_mut(at::SIZE)) {
            write(header, out);
        }
        Ok((ptr, self.0.len()))
    }
}

/// Writes one header into `out` (`at::SIZE` zeroed bytes): padding and the
/// payloads of absent options stay zero, so a guest reads the same bytes
/// for the same history every time.
fn write(h: &wit::Header, out: &mut [u8]) {
    fn put(out: &mut [u8], at: usize, bytes: &[u8]) {
        out[at..at + bytes.len()].copy_from_slice(bytes);
    }
    out[at::ROLE] = match h.role {
        wit::Role::System => 0,
        wit::Role::User => 1,
        wit::Role::Assistant => 2,
        wit::Role::Tool => 3,
    };
    out[at::FLAGS] = [
        wit::MessageFlags::SYNTHETIC,
        wit::MessageFlags::SUMMARY,
        wit::MessageFlags::ERROR,
    ]
    .iter()
    .enumerate()
    .filter(|(_, f)| h.flags.contains(**f))
    .fold(0u8, |bits, (i, _)| bits | (1 << i));
    put(out, at::TOKENS, &h.tokens.to_le_bytes());
    if let Some(t) = h.timestamp {
        out[at::TIMESTAMP] = 1;
        put(out, at::TIMESTAMP_SECONDS, &t.seconds.to_le_bytes());
        put(out, at::TIMESTAMP_NANOS, &t.nanoseconds.to_le_bytes());
    }
    if let Some(i) = h.answers {
        out[at::ANSWERS] = 1;
        put(out, at::ANSWERS_VALUE, &i.to_le_bytes());
    }
    put(out, at::TOOL_CALLS, &h.tool_calls.to_le_bytes());
    put(out, at::PARTS, &h.parts.to_le_bytes());
    put(out, at::CONTENT_BYTES, &h.content_bytes.to_le_bytes());
    if let Some(n) = h.reasoning_bytes {
        out[at::REASONING_BYTES] = 1;
        put(out, at::REASONING_BYTES_VALUE, &n.to_le_bytes());
    }
    put(out, at::METADATA_BYTES, &h.metadata_bytes.to_le_bytes());
    if let Some(u) = h.usage {
        out[at::USAGE] = 1;
        put(out, at::USAGE_INPUT, &u.input_tokens.to_le_bytes());
        put(out, at::USAGE_OUTPUT, &u.output_tokens.to_le_bytes());
        if let Some(n) = u.cache_read_tokens {
            out[at::USAGE_CACHE_READ] = 1;
            put(out, at::USAGE_CACHE_READ_VALUE, &n.to_le_bytes());
        }
        if let Some(n) = u.cache_write_tokens {
            out[at::USAGE_CACHE_WRITE] = 1;
            put(out, at::USAGE_CACHE_WRITE_VALUE, &n.to_le_bytes());
        }
    }
}

/// Registers the host functions above over the generated ones in `linker`
/// (after `add_to_linker`).
pub(crate) fn shadow(linker: &mut Linker<State>) -> wasmtime::Result<()> {
    linker.allow_shadowing(true);
    let mut types = linker.instance(TYPES_INTERFACE)?;
    types.func_wrap(
        "[method]history.headers",
        |mut store: StoreContextMut<'_, State>,
         (history, start, end): (Resource<HistoryData>, u32, u32)| {
            let data = store.data_mut().table.get_mut(&history)?;
            Ok((HeaderList(data.headers(start, end)),))
        },
    )?;
    types.func_wrap(
        "[method]history.messages",
        |store: StoreContextMut<'_, State>,
         (history, start, end): (Resource<HistoryData>, u32, u32)| {
            let (data, counter) = history_and_counter(&store, &history)?;
            Ok((MessageList {
                range: data.range(start, end),
                messages: Arc::clone(&data.messages),
                counter,
            },))
        },
    )?;
    types.func_wrap(
        "[method]history.message",
        |store: StoreContextMut<'_, State>, (history, index): (Resource<HistoryData>, u32)| {
            let (data, counter) = history_and_counter(&store, &history)?;
            Ok((data.get(index).map(|_| OneMessage {
                index: index as usize,
                messages: Arc::clone(&data.messages),
                counter,
            }),))
        },
    )?;
    types.func_wrap(
        "[method]history.contents",
        |store: StoreContextMut<'_, State>,
         (history, start, end): (Resource<HistoryData>, u32, u32)| {
            let (data, _) = history_and_counter(&store, &history)?;
            Ok((ContentList {
                range: data.range(start, end),
                messages: Arc::clone(&data.messages),
            },))
        },
    )?;
    types.func_wrap(
        "[method]history.content",
        |store: StoreContextMut<'_, State>, (history, index): (Resource<HistoryData>, u32)| {
            let (data, _) = history_and_counter(&store, &history)?;
            Ok((data.get(index).map(|_| OneContent {
                index: index as usize,
                messages: Arc::clone(&data.messages),
            }),))
        },
    )?;
    linker.allow_shadowing(false);
    Ok(())
}

/// The history behind `handle` and the call's token counter.
fn history_and_counter<'a>(
    store: &'a StoreContextMut<'_, State>,
    handle: &Resource<HistoryData>,
) -> wasmtime::Result<(&'a HistoryData, Arc<dyn TokenCounter>)> {
    let state = store.data();
    Ok((state.table.get(handle)?, Arc::clone(&state.counter)))
}

/// `list<message>`: messages `range` of the history, lowered borrowed.
struct MessageList {
    messages: Arc<Vec<Message>>,
    range: Range<usize>,
    counter: Arc<dyn TokenCounter>,
}

/// `message`: message `index` of the history, lowered borrowed.
struct OneMessage {
    messages: Arc<Vec<Message>>,
    index: usize,
    counter: Arc<dyn TokenCounter>,
}

/// `list<string>`: the contents of messages `range`, lowered borrowed.
struct ContentList {
    messages: Arc<Vec<Message>>,
    range: Range<usize>,
}

/// `string`: the content of message `index`, lowered borrowed.
struct OneContent {
    messages: Arc<Vec<Message>>,
    index: usize,
}

/// Implements `ComponentType` and `Lower` for `$ty` as the borrowed value
/// `$view` builds from it (`$target` being that value's type with any
/// lifetime `'static`, for the type information): the type information is
/// the borrowed value's, and lowering is its lowering.
macro_rules! lowered_as {
    ($ty:ty, $target:ty, |$this:ident| $view:expr) => {
        // SAFETY: the type information and the lowering are both the
        // borrowed value's (`$target`, a derived or built-in `Lower`).
        #[allow(unsafe_code)]
        unsafe impl ComponentType for $ty {
            type Lower = <$target as ComponentType>::Lower;

            const ABI: CanonicalAbiInfo = <$target as ComponentType>::ABI;

            fn typecheck(ty: &InterfaceType, types: &InstanceType<'_>) -> wasmtime::Result<()> {
                <$target as ComponentType>::typecheck(ty, types)
            }
        }

        // SAFETY: see above.
        #[allow(unsafe_code)]
        unsafe impl Lower for $ty {
            fn linear_lower_to_flat<T>(
                &self,
                cx: &mut LowerContext<'_, T>,
                ty: InterfaceType,
                dst: &mut std::mem::MaybeUninit<Self::Lower>,
            ) -> wasmtime::Result<()> {
                let $this = self;
                let view = $view;
                Lower::linear_lower_to_flat(&view, cx, ty, dst)
            }

            fn linear_lower_to_memory<T>(
                &self,
                cx: &mut LowerContext<'_, T>,
                ty: InterfaceType,
                offset: usize,
            ) -> wasmtime::Result<()> {
                let $this = self;
                let view = $view;
                Lower::linear_lower_to_memory(&view, cx, ty, offset)
            }
        }
    };
}

lowered_as!(MessageList, Vec<MessageIn<'static>>, |list| {
    list.messages[list.range.clone()]
        .iter()
        .map(|m| bindings::message_in(m, &*list.counter))
        .collect::<Vec<_>>()
});

lowered_as!(OneMessage, MessageIn<'static>, |one| {
    bindings::message_in(&one.messages[one.index], &*one.counter)
});

lowered_as!(ContentList, Vec<&'static str>, |list| {
    list.messages[list.range.clone()]
        .iter()
        .map(|m| m.content.as_str())
        .collect::<Vec<_>>()
});

lowered_as!(OneContent, &'static str, |one| one.messages[one.index]
    .content
    .as_str());

#[cfg(test)]
mod tests {
    use super::*;

    /// The offsets above, computed the way wasmtime computes them from the
    /// generated types.
    #[test]
    fn layout_matches_the_canonical_abi() {
        fn abi<T: ComponentType>() -> CanonicalAbiInfo {
            T::ABI
        }
        let mut offset = 0u32;
        let mut next = |info: CanonicalAbiInfo| info.next_field32(&mut offset) as usize;
        assert_eq!(next(abi::<wit::Role>()), at::ROLE);
        assert_eq!(next(abi::<wit::MessageFlags>()), at::FLAGS);
        assert_eq!(next(abi::<u32>()), at::TOKENS);
        assert_eq!(next(abi::<Option<wit::Timestamp>>()), at::TIMESTAMP);
        assert_eq!(next(abi::<Option<u32>>()), at::ANSWERS);
        assert_eq!(next(abi::<u32>()), at::TOOL_CALLS);
        assert_eq!(next(abi::<u32>()), at::PARTS);
        assert_eq!(next(abi::<u32>()), at::CONTENT_BYTES);
        assert_eq!(next(abi::<Option<u32>>()), at::REASONING_BYTES);
        assert_eq!(next(abi::<u32>()), at::METADATA_BYTES);
        assert_eq!(next(abi::<Option<wit::Usage>>()), at::USAGE);
        let header = abi::<wit::Header>();
        assert_eq!(header.size32 as usize, at::SIZE);
        assert_eq!(header.align32, at::ALIGN);

        // Inside the options: the payload after the discriminant, at its
        // alignment; inside the records, field after field.
        let payload = |info: CanonicalAbiInfo| info.align32 as usize;
        assert_eq!(
            at::TIMESTAMP + payload(abi::<wit::Timestamp>()),
            at::TIMESTAMP_SECONDS
        );
        let mut offset = 0u32;
        let s = abi::<i64>().next_field32(&mut offset) as usize;
        let n = abi::<u32>().next_field32(&mut offset) as usize;
        assert_eq!(at::TIMESTAMP_SECONDS + s, at::TIMESTAMP_SECONDS);
        assert_eq!(at::TIMESTAMP_SECONDS + n, at::TIMESTAMP_NANOS);
        assert_eq!(at::ANSWERS + payload(abi::<u32>()), at::ANSWERS_VALUE);
        assert_eq!(
            at::REASONING_BYTES + payload(abi::<u32>()),
            at::REASONING_BYTES_VALUE
        );
        let usage = at::USAGE + payload(abi::<wit::Usage>());
        assert_eq!(usage, at::USAGE_INPUT);
        let mut offset = 0u32;
        let fields = [
            abi::<u64>(),
            abi::<u64>(),
            abi::<Option<u64>>(),
            abi::<Option<u64>>(),
        ]
        .map(|f| usage + f.next_field32(&mut offset) as usize);
        assert_eq!(
            fields,
            [
                at::USAGE_INPUT,
                at::USAGE_OUTPUT,
                at::USAGE_CACHE_READ,
                at::USAGE_CACHE_WRITE
            ]
        );
        assert_eq!(
            at::USAGE_CACHE_READ + payload(abi::<u64>()),
            at::USAGE_CACHE_READ_VALUE
        );
        assert_eq!(
            at::USAGE_CACHE_WRITE + payload(abi::<u64>()),
            at::USAGE_CACHE_WRITE_VALUE
        );
        assert_eq!(at::USAGE_CACHE_WRITE_VALUE + 8, at::SIZE);
    }

    #[test]
    fn absent_options_and_padding_are_zero() {
        let header = wit::Header {
            role: wit::Role::Tool,
            flags: wit::MessageFlags::SUMMARY | wit::MessageFlags::ERROR,
            tokens: 7,
            timestamp: None,
            answers: Some(3),
            tool_calls: 0,
            parts: 2,
            content_bytes: 300,
            reasoning_bytes: None,
            metadata_bytes: 0,
            usage: None,
        };
        let mut out = vec![0u8; at::SIZE];
        write(&header, &mut out);
        let mut expected = vec![0u8; at::SIZE];
        expected[at::ROLE] = 3;
        expected[at::FLAGS] = 0b110;
        expected[at::TOKENS] = 7;
        expected[at::ANSWERS] = 1;
        expected[at::ANSWERS_VALUE] = 3;
        expected[at::PARTS] = 2;
        expected[at::CONTENT_BYTES..at::CONTENT_BYTES + 2].copy_from_slice(&300u16.to_le_bytes());
        assert_eq!(out, expected);
    }
}
