//! topoplan's planner: the topology model and its readers, paths, channel search, the schedule IR
//! and the tuner. Everything else in topoplan depends on this crate; it depends on none of them.

pub mod bound;
pub mod input;
pub mod plan;
pub mod schedule;
pub mod search;
pub mod topology;
pub mod tuner;
