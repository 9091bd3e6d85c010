//! `topoplan topo`.

use super::error::{CliError, CliResult};

#[derive(clap::Args, Debug)]
pub struct Args {}

pub fn run(_args: Args) -> CliResult {
    Err(CliError::failure("`topoplan topo` is not built yet"))
}
