//! `topoplan bench`'s argument checks.

use super::procs::check_procs;
use super::*;

#[test]
fn lists_accept_all_and_reject_unknown_names() {
    let all = list("all", &DataType::ALL, DataType::parse, "--datatype").unwrap();
    assert_eq!(all.len(), 12);
    let fp8 = list(
        "f8e4m3,f8e5m2",
        &DataType::ALL,
        DataType::parse,
        "--datatype",
    )
    .unwrap();
    assert_eq!(fp8, vec![DataType::F8E4M3, DataType::F8E5M2]);
    let unsigned = list("uint32,u64", &DataType::ALL, DataType::parse, "--datatype").unwrap();
    assert_eq!(unsigned, vec![DataType::U32, DataType::U64]);
    let two = list("float,bf16", &DataType::ALL, DataType::parse, "--datatype").unwrap();
    assert_eq!(two, vec![DataType::F32, DataType::Bf16]);
    let bad = list("float,f128", &DataType::ALL, DataType::parse, "--datatype");
    assert!(matches!(bad, Err(CliError::Input(_))));
}

#[derive(clap::Parser)]
struct Cmd {
    #[command(flatten)]
    args: Args,
}

fn parse(argv: &[&str]) -> Args {
    use clap::Parser;
    Cmd::try_parse_from(std::iter::once("bench").chain(argv.iter().copied()))
        .unwrap()
        .args
}

fn procs_err(argv: &[&str]) -> String {
    let a = parse(argv);
    assert!(a.procs);
    match check_procs(&a, &a.algo) {
        Err(CliError::Input(m)) => m,
        other => panic!("{argv:?}: expected an input error, got {other:?}"),
    }
}

#[test]
fn procs_arguments_are_checked() {
    assert!(!parse(&["-g", "2"]).procs);
    for ok in [
        &["-g", "2", "--procs"][..],
        &["-g", "8", "--procs", "--algo", "one-shot"],
        &["-g", "4", "--procs", "--algo", "one-shot-ll", "-c", "0"],
        &["-g", "2", "--procs", "--vs-nccl"],
        &["-g", "2", "--procs", "--cuda-graph", "--vs-nccl"],
    ] {
        let a = parse(ok);
        assert!(check_procs(&a, &a.algo).is_ok(), "{ok:?}");
    }
    let e = procs_err(&["-g", "2", "--procs", "--algo", "ring"]);
    assert!(
        e.contains("one-shot (direct) schedules only") && e.contains("`ring`"),
        "{e}"
    );
    assert!(e.contains("--algo auto, one-shot, one-shot-ll"), "{e}");
    assert!(!e.contains("two-shot,") && !e.contains(" ce"), "{e}");
    assert!(procs_err(&["-g", "2", "--procs", "--algo", "ce"]).contains("`ce`"));
    assert!(procs_err(&["-g", "1", "--procs"]).contains("-g 2 to 8"));
    assert!(procs_err(&["-g", "9", "--procs"]).contains("-g 2 to 8"));
}

#[test]
fn ranks_per_gpu_arguments_are_checked() {
    let err = |argv: &[&str]| match check_ranks_per_gpu(&parse(argv)) {
        Err(CliError::Input(m)) => m,
        other => panic!("{argv:?}: expected an input error, got {other:?}"),
    };
    assert!(check_ranks_per_gpu(&parse(&["-g", "2"])).is_ok());
    assert_eq!(nranks(&parse(&["-g", "2", "--ranks-per-gpu", "4"])), 8);
    assert!(err(&["--ranks-per-gpu", "0"]).contains("at least 1"));
    assert!(err(&["-g", "3", "--ranks-per-gpu", "3"]).contains("9 ranks: at most 8"));
    assert!(err(&["-g", "1", "--ranks-per-gpu", "4", "--procs"]).contains("not with --procs"));
    assert!(err(&["-g", "1", "--ranks-per-gpu", "4", "--vs-nccl"]).contains("NCCL refuses"));
    let e = err(&["-g", "1", "--ranks-per-gpu", "2", "--plot", "x.svg"]);
    assert!(e.contains("not performance"), "{e}");
}

#[test]
fn procs_is_documented_in_the_help() {
    use clap::CommandFactory;
    let help = Cmd::command().render_long_help().to_string();
    assert!(help.contains("--procs"), "{help}");
    assert!(help.contains("CUDA IPC"), "{help}");
}
