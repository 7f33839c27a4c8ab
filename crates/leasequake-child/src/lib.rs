//! leasequake's child side: what runs inside a worker process. `worker/` is
//! the built-in worker (the blog's lease loop), `substrate/` where a lease
//! lives (and the view of it the harness reads), `child/` what a child does
//! first (its tie to the harness, the exec trampoline for programs), and
//! `realtime.rs` the real-time scheduling the worker and the harness both
//! use. A crate of its own, so that the compiler holds it to its layer: it
//! imports the model and nothing else of leasequake.

pub mod child;
pub mod realtime;
pub mod substrate;
pub mod worker;

pub use leasequake_model as model;
