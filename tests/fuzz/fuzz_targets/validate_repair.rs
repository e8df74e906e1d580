//! The validator and repair on arbitrary message lists.
//!
//! The edit application (`apply`) lives in the host runtime next to wasmtime,
//! so this target covers its core side instead: what `apply` runs on a
//! processor's answer is `validate`, and what makes a history valid is
//! `repair`. Properties: nothing panics, a repaired history validates,
//! repair is idempotent, and a history that validates needs no repair.
#![no_main]

use agent_host_core::repair::repair;
use agent_host_core::validate::validate;
use agent_host_core::{Message, Reasoning, Role};
use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;

/// Ids come from a small pool so that calls and results collide often.
const IDS: [&str; 5] = ["", "c1", "c2", "c3", "c1 "];

#[derive(Arbitrary, Debug)]
struct Spec {
    role: u8,
    id: u8,
    content: String,
    calls: Vec<(u8, String)>,
    answers: Option<u8>,
    reasoning: Option<String>,
    is_error: bool,
    synthetic: bool,
}

impl Spec {
    fn message(self, index: usize) -> Message {
        let role =
            [Role::System, Role::User, Role::Assistant, Role::Tool][usize::from(self.role % 4)];
        let mut m = Message::new(role, self.content).with_id(format!("m{index}-{}", self.id % 3));
        for (id, name) in self.calls.into_iter().take(6) {
            m.push_tool_call(IDS[usize::from(id) % IDS.len()], name, "{}");
        }
        m.tool_call_id = self
            .answers
            .map(|a| IDS[usize::from(a) % IDS.len()].to_owned());
        m.reasoning = self.reasoning.map(|text| Reasoning {
            text,
            ..Reasoning::default()
        });
        m.is_error = self.is_error;
        m.synthetic = self.synthetic;
        m
    }
}

fuzz_target!(|specs: Vec<Spec>| {
    let messages: Vec<Message> = specs
        .into_iter()
        .take(64)
        .enumerate()
        .map(|(i, s)| s.message(i))
        .collect();
    let violations = validate(&messages);
    for v in &violations {
        assert!(v.index() < messages.len(), "{v:?} points past the end");
    }
    let (repaired, changes) = repair(messages.clone());
    if violations.is_empty() {
        assert!(
            changes.is_empty(),
            "a valid history needs no repair: {changes:?}"
        );
        assert_eq!(repaired, messages);
    }
    assert_eq!(validate(&repaired), [], "a repaired history validates");
    let (again, more) = repair(repaired.clone());
    assert!(more.is_empty(), "repair is idempotent: {more:?}");
    assert_eq!(again, repaired);
});
