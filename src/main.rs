//! The `topoplan` command line: one subcommand per job, each in `src/cli/`.

use clap::{Parser, Subcommand};

mod cli;

#[derive(Parser)]
#[command(
    name = "topoplan",
    version,
    about = "Plan, simulate, verify and run GPU collectives on a machine's real topology",
    long_about = "topoplan reads a GPU machine's topology (NCCL's NCCL_TOPO_DUMP_FILE XML or topoplan's JSON), \
searches ring/tree/direct schedules, predicts their time with a simulator, proves them correct, and runs them.\n\n\
Exit status: 0 success, 1 failure (e.g. a schedule that does not verify), 2 bad input or usage."
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Read, show, convert and scale topology files.
    Topo(cli::topo::Args),
    /// Plan every collective on a topology: channels, algorithm and protocol per size.
    Plan(cli::plan::Args),
    /// Predict collective times on a topology with the simulator (nccl-tests style table).
    Sim(cli::sim::Args),
    /// Prove that planned (or imported) schedules compute their collective and cannot deadlock.
    Verify(cli::verify::Args),
    /// Fit a machine profile to nccl-tests output files and print each point's fit error.
    Calibrate(cli::calibrate::Args),
    /// Compare what-if scenarios (more nodes, other links, failures) side by side.
    Whatif(cli::whatif::Args),
    /// Execute collectives with the runtime and check every element (nccl-tests style).
    Run(cli::run::Args),
    /// Benchmark collectives on the local GPUs, optionally against NCCL in the same run.
    Bench(cli::bench::Args),
    /// Write the local machine's topology as NCCL XML and topoplan JSON.
    Detect(cli::detect::Args),
    /// Explain slow or hanging collectives: checks the environment, NCCL logs, nccl-tests output and sysfs.
    Doctor(cli::doctor::Args),
    /// List the TOPOPLAN_* environment variables: type, default, current value, doc.
    Env(cli::env::Args),
}

/// Restores the default SIGPIPE action so `topoplan plan x | head` ends quietly, as Unix tools do,
/// instead of panicking on the closed pipe (Rust ignores SIGPIPE by default).
#[cfg(unix)]
#[allow(unsafe_code)]
fn default_sigpipe() {
    // SAFETY: called once at start-up before any thread exists; SIG_DFL is a valid action.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}

#[cfg(not(unix))]
fn default_sigpipe() {}

fn main() {
    default_sigpipe();
    let cli = Cli::parse();
    // Misspelt TOPOPLAN_* variables get one warning, and a set variable with an invalid value is
    // refused as `env --check` refuses it (`env` lists them itself).
    if !matches!(cli.command, Command::Env(_)) {
        params::warn_unknown_once();
        if let Err(e) = cli::env::check_values() {
            eprintln!("error: {e}");
            std::process::exit(e.exit_code());
        }
    }
    let result = match cli.command {
        Command::Topo(a) => cli::topo::run(a),
        Command::Plan(a) => cli::plan::run(a),
        Command::Sim(a) => cli::sim::run(a),
        Command::Verify(a) => cli::verify::run(a),
        Command::Whatif(a) => cli::whatif::run(a),
        Command::Calibrate(a) => cli::calibrate::run(a),
        Command::Run(a) => cli::run::run(a),
        Command::Bench(a) => cli::bench::run(a),
        Command::Detect(a) => cli::detect::run(a),
        Command::Doctor(a) => cli::doctor::run(a),
        Command::Env(a) => cli::env::run(a),
    };
    if let Err(e) = result {
        eprintln!("error: {e}");
        std::process::exit(e.exit_code());
    }
}
