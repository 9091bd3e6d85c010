//! `topoplan doctor` run on the corpus in tests/data/doctor/, as the doctor test files read it.

use serde_json::Value;
use std::process::Command;

pub const D: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/doctor");
pub const TOPO: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/data/topologies/h200x2-topo.xml"
);

/// Runs doctor with `args` (hermetic: an empty environment file and no GPU probe unless the
/// args name their own); returns (exit code, JSON report or Null, stderr).
pub fn doctor(args: &[&str]) -> (i32, Value, String) {
    let mut a: Vec<String> = vec!["doctor".into(), "--no-detect".into(), "--json".into()];
    if !args.contains(&"--env") {
        a.extend(["--env".into(), "/dev/null".into()]);
    }
    if !args.contains(&"--sysfs") {
        a.push("--no-sysfs".into());
    }
    a.extend(args.iter().map(|s| s.replace("@", D)));
    let out = Command::new(env!("CARGO_BIN_EXE_topoplan"))
        .args(&a)
        .output()
        .unwrap();
    let v = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
    (
        out.status.code().unwrap_or(-1),
        v,
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// (check, severity) of every finding, in report order.
pub fn found(v: &Value) -> Vec<(String, String)> {
    v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            (
                f["check"].as_str().unwrap().into(),
                f["severity"].as_str().unwrap().into(),
            )
        })
        .collect()
}

pub fn finding<'a>(v: &'a Value, check: &str) -> &'a Value {
    v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["check"] == check)
        .unwrap_or_else(|| panic!("no {check} in {v}"))
}

pub fn has(v: &Value, check: &str, sev: &str) -> bool {
    found(v).iter().any(|(c, s)| c == check && s == sev)
}
