//! Paths of the test guests (`tests/guests/examples`), built into components
//! by this crate's build script. Tests load them with the real runtime.

include!(concat!(env!("OUT_DIR"), "/artifacts.rs"));
