//! The machine profile `topoplan bench --algo auto` prices its candidates with, and the bench
//! sweep `topoplan calibrate --measure` runs.

use super::{report, run_configs, Args, Mode};
use crate::cli::error::CliError;
use planner::tuner::Profile;

/// The profile `auto` prices its candidates with (`--profile`, else the bundled one) and how
/// the tables name it.
pub struct Priced {
    pub profile: Profile,
    /// `profile bundled `h200x2``, or `profile `NAME` from FILE`.
    pub label: String,
}

impl Priced {
    /// Reads and checks `--profile FILE` (the loader's errors name the file and field), or takes
    /// the bundled profile. Touches no GPU.
    pub fn load(path: Option<&std::path::Path>) -> Result<Priced, CliError> {
        Ok(match path {
            Some(p) => {
                let profile =
                    Profile::load(p).map_err(|e| CliError::input(format!("--profile: {e}")))?;
                let label = format!("profile `{}` from {}", profile.name, p.display());
                Priced { profile, label }
            }
            None => {
                let profile = Profile::bundled().clone();
                let label = format!("profile bundled `{}`", profile.name);
                Priced { profile, label }
            }
        })
    }
}

/// `topoplan calibrate --measure`: all-reduce and all-gather on GPUs 0..`ngpus`, 8 B to 1 GiB
/// by 4, ours and NCCL alternating on the same buffers: what `topoplan bench -b 8 -e 1G -f 4
/// --coll all-reduce,all-gather --vs-nccl -c 0` runs, through the same code. The tables are
/// printed as the bench prints them.
pub fn measure_vs_nccl(ngpus: usize, priced: &Priced) -> Result<report::Report, CliError> {
    run_configs(&calibration_args(ngpus)?, &mut Mode::Single, priced)
}

/// The bench arguments of [`measure_vs_nccl`].
fn calibration_args(ngpus: usize) -> Result<Args, CliError> {
    #[derive(clap::Parser)]
    struct Cmd {
        #[command(flatten)]
        args: Args,
    }
    use clap::Parser;
    let g = ngpus.to_string();
    let argv = [
        "bench",
        "-b",
        "8",
        "-e",
        "1G",
        "-f",
        "4",
        "-g",
        &g,
        "--coll",
        "all-reduce,all-gather",
        "--vs-nccl",
        "-c",
        "0",
    ];
    Ok(Cmd::try_parse_from(argv)
        .map_err(|e| CliError::failure(format!("the calibration sweep's arguments: {e}")))?
        .args)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_calibration_sweep_is_8_bytes_to_1_gib_by_4_against_nccl() {
        let a = calibration_args(4).unwrap();
        assert_eq!((a.min_bytes, a.max_bytes, a.factor), (8, 1 << 30, 4));
        assert_eq!((a.ngpus, a.coll.as_str()), (4, "all-reduce,all-gather"));
        assert!(a.vs_nccl && !a.procs && !a.cuda_graph && a.check == 0);
        assert_eq!((a.algo.as_str(), a.profile.as_ref()), ("auto", None));
    }
}
