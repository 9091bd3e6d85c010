//! One module per subcommand. Each defines `Args` (clap) and `run(Args) -> CliResult`.

pub mod common;
pub mod error;
pub mod launch;
pub mod sizes;

pub mod bench;
pub mod calibrate;
pub mod detect;
pub mod doctor;
pub mod env;
pub mod plan;
pub mod plan_bound;
pub mod run;
pub mod sim;
pub mod topo;
pub mod verify;
pub mod whatif;
