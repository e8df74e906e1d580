//! A session hook whose behaviour the session key chooses: `fail` returns an
//! error, `trap` panics, `spin` loops forever, `grow` allocates without end;
//! any other key (or none) logs one line that describes the event and
//! succeeds, so a test can check what reached the guest.
wit_bindgen::generate!({ path: "../../wit/hooks/v0.1.0", world: "session-hook", generate_all });

use agent_host::history::host::{Level, estimate_tokens, log};
use agent_host::history::types::Error;
use exports::agent_host::hooks::hook::{Guest, HookEvent, HookKind};

struct Hook;

impl Guest for Hook {
    #[allow(unreachable_code)]
    fn on_event(event: HookEvent) -> Result<(), Error> {
        match event.key.as_deref() {
            Some("fail") => {
                return Err(Error::Failed(format!(
                    "refused session {} on purpose",
                    event.session_id
                )));
            }
            Some("trap") => panic!("the hook panicked on purpose"),
            Some("spin") => {
                let mut x: u64 = 0;
                loop {
                    x = std::hint::black_box(x.wrapping_add(1));
                }
            }
            Some("grow") => {
                let mut hoard: Vec<Vec<u8>> = Vec::new();
                loop {
                    hoard.push(vec![1u8; 1 << 20]);
                    std::hint::black_box(&hoard);
                }
            }
            _ => {}
        }
        let kind = match event.kind {
            HookKind::SessionCreate => "session-create",
            HookKind::SessionSave => "session-save",
            HookKind::SessionDelete => "session-delete",
            HookKind::BeforeCompaction => "before-compaction",
        };
        let contents: Vec<&str> = event.messages.iter().map(|m| m.content.as_str()).collect();
        let tokens: u32 = event.messages.iter().map(|m| m.tokens).sum();
        log(
            Level::Info,
            &format!(
                "{kind} session={} key={:?} agent={} channel={:?} messages={:?} tokens={} \
                 at={}.{:09} config={} estimate={}",
                event.session_id,
                event.key,
                event.agent,
                event.channel,
                contents,
                tokens,
                event.at.seconds,
                event.at.nanoseconds,
                event.config,
                estimate_tokens("four words of text"),
            ),
        );
        Ok(())
    }
}

export!(Hook);
