//! Where a lease lives. The lock file (the blog's) first; flock, Redis and
//! PostgreSQL come later behind the same worker loop.

pub mod lockfile;
pub mod resource;
pub mod tokens;
