//! topoplan's simulator: deterministic discrete-event timing of schedules on topologies, and
//! symbolic verification that a schedule computes its collective. Depends on `planner` only.
