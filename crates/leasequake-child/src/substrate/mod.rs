//! Where a lease lives, behind one interface that the worker's loop
//! (acquire, renew, watch, take over, release) runs over:
//!
//! * `file`: the blog's lock file with its variants; expiry judged by the
//!   reader's clock;
//! * `flock`: a kernel lock the kernel drops when its holder dies, and never
//!   otherwise: no expiry at all;
//! * `redis`: `SET key value NX PX ttl`; expiry judged by the server;
//! * `postgres`: a lease row whose `expires_at` is judged by the server's
//!   `now()`, taken over by a conditional update; or a session advisory
//!   lock, held as long as the holder's connection lives;
//! * `etcd`: a key attached to an etcd lease (whole seconds), kept alive by
//!   its holder; expiry judged and carried out by the server.
//!
//! Every substrate gives each grant a fencing token strictly above every
//! earlier grant's (file and flock only with `fencing_tokens`).

pub mod etcd;
pub mod file;
pub mod flock;
mod keyspace;
mod lease;
pub mod lockfile;
mod open;
mod pg_listen;
pub mod postgres;
pub mod redis;
pub mod redlock;
pub mod resource;
pub mod tokens;
pub mod view;

pub use lease::{Pushed, Renewal, Seen, Substrate};
pub use lockfile::{Lease, ReadError};
pub use open::{Open, Unanswered, forget, open, preflight};
