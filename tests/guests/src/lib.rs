//! Test guests live in `examples/`; this library is empty.
