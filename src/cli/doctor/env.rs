//! The environment a job runs with: NCCL's and PyTorch's variables, the launcher's rank
//! variables (torchrun, Slurm, Open MPI) and `CUDA_VISIBLE_DEVICES`, read from this process or
//! from a `KEY=VALUE` file (so that a job's environment can be checked anywhere).

use super::input::Text;
use crate::cli::error::CliError;
use std::collections::BTreeMap;

/// One variable and where it was read.
#[derive(Debug, Clone, PartialEq)]
pub struct Var {
    pub value: String,
    /// `env FILE:LINE`, or `environment` for the live process.
    pub source: String,
}

#[derive(Debug, Clone, Default)]
pub struct Env {
    pub vars: BTreeMap<String, Var>,
}

/// Whether a variable matters to a check.
pub fn relevant(key: &str) -> bool {
    const EXACT: &[&str] = &[
        "CUDA_VISIBLE_DEVICES",
        "RANK",
        "LOCAL_RANK",
        "WORLD_SIZE",
        "LOCAL_WORLD_SIZE",
        "GROUP_RANK",
        "NODE_RANK",
        "MASTER_ADDR",
        "MASTER_PORT",
    ];
    EXACT.contains(&key)
        || [
            "NCCL_",
            "TORCH_NCCL_",
            "SLURM_",
            "OMPI_COMM_WORLD_",
            "TORCHELASTIC_",
        ]
        .iter()
        .any(|p| key.starts_with(p))
}

impl Env {
    /// The live process's environment.
    pub fn from_process() -> Env {
        let mut e = Env::default();
        for (k, v) in std::env::vars_os() {
            let (Some(k), Some(v)) = (k.to_str(), v.to_str()) else {
                continue;
            };
            if relevant(k) {
                e.vars.insert(
                    k.to_string(),
                    Var {
                        value: v.to_string(),
                        source: "environment".into(),
                    },
                );
            }
        }
        e
    }

    /// `KEY=VALUE` lines (`export ` allowed, `#` comments, quotes stripped); anything else is
    /// bad input naming the line.
    pub fn parse(t: &Text) -> Result<Env, CliError> {
        let mut e = Env::default();
        for (i, raw) in t.body.lines().enumerate() {
            let line = raw.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let line = line.strip_prefix("export ").unwrap_or(line).trim();
            let Some((k, v)) = line.split_once('=') else {
                return Err(CliError::input(format!(
                    "{}:{}: expected KEY=VALUE, found \"{}\"",
                    t.name,
                    i + 1,
                    short(line)
                )));
            };
            let k = k.trim();
            if k.is_empty() || !k.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
                return Err(CliError::input(format!(
                    "{}:{}: \"{}\" is not a variable name",
                    t.name,
                    i + 1,
                    short(k)
                )));
            }
            let v = v.trim();
            let v = v
                .strip_prefix('"')
                .and_then(|x| x.strip_suffix('"'))
                .or_else(|| v.strip_prefix('\'').and_then(|x| x.strip_suffix('\'')))
                .unwrap_or(v);
            if relevant(k) {
                e.vars.insert(
                    k.to_string(),
                    Var {
                        value: v.to_string(),
                        source: format!("{}:{}", t.name, i + 1),
                    },
                );
            }
        }
        Ok(e)
    }

    pub fn get(&self, k: &str) -> Option<&str> {
        self.vars.get(k).map(|v| v.value.as_str())
    }

    /// `KEY=VALUE (source)` for a finding's evidence.
    pub fn cite(&self, k: &str) -> String {
        match self.vars.get(k) {
            Some(v) => format!("{k}={} ({})", v.value, v.source),
            None => format!("{k} unset"),
        }
    }

    /// An integer variable; a value that is not one is reported as `Err(text)`.
    pub fn int(&self, k: &str) -> Option<Result<i64, String>> {
        self.get(k)
            .map(|v| v.trim().parse::<i64>().map_err(|_| v.to_string()))
    }

    /// Nodes in the job as the launcher tells it (Slurm, or torchrun's sizes), if it does.
    pub fn launcher_nodes(&self) -> Option<(i64, String)> {
        for k in ["SLURM_JOB_NUM_NODES", "SLURM_NNODES"] {
            if let Some(Ok(n)) = self.int(k) {
                return Some((n, self.cite(k)));
            }
        }
        match (self.int("WORLD_SIZE"), self.int("LOCAL_WORLD_SIZE")) {
            (Some(Ok(w)), Some(Ok(l))) if l > 0 => Some((
                (w + l - 1) / l,
                format!(
                    "{}, {}",
                    self.cite("WORLD_SIZE"),
                    self.cite("LOCAL_WORLD_SIZE")
                ),
            )),
            _ => None,
        }
    }
}

fn short(s: &str) -> String {
    s.chars().take(60).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::doctor::input::from_bytes;
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig { cases: 256, failure_persistence: None, .. ProptestConfig::default() })]
        /// Random text is an environment or bad input naming a line, never a panic.
        #[test]
        fn random_text_never_panics(lines in proptest::collection::vec("[ -~]{0,40}", 0..12)) {
            let body = lines.join("\n");
            if let Ok(t) = from_bytes("r.env", body.into_bytes()) {
                if let Err(e) = Env::parse(&t) {
                    prop_assert!(e.to_string().starts_with("r.env:"), "{}", e);
                }
            }
        }
    }

    fn env(s: &str) -> Result<Env, CliError> {
        Env::parse(&from_bytes("job.env", s.as_bytes().to_vec()).unwrap())
    }

    #[test]
    fn reads_relevant_variables_with_their_line() {
        let e = env("# job\nexport NCCL_P2P_DISABLE=1\nHOME=/root\nMASTER_ADDR=\"10.0.0.1\"\n\nWORLD_SIZE=16\nLOCAL_WORLD_SIZE=8\n").unwrap();
        assert_eq!(e.get("NCCL_P2P_DISABLE"), Some("1"));
        assert_eq!(e.cite("NCCL_P2P_DISABLE"), "NCCL_P2P_DISABLE=1 (job.env:2)");
        assert_eq!(e.get("HOME"), None, "irrelevant variables are dropped");
        assert_eq!(e.get("MASTER_ADDR"), Some("10.0.0.1"));
        assert_eq!(e.launcher_nodes().unwrap().0, 2);
    }

    #[test]
    fn a_line_without_equals_is_bad_input() {
        let e = env("NCCL_DEBUG=INFO\nthis is not a variable\n").unwrap_err();
        assert_eq!(e.exit_code(), 2);
        assert!(
            e.to_string().starts_with("job.env:2: expected KEY=VALUE"),
            "{e}"
        );
        assert!(env("BAD-NAME=1\n")
            .unwrap_err()
            .to_string()
            .contains("job.env:1"));
    }

    #[test]
    fn slurm_node_count_wins_over_torchrun_sizes() {
        let e = env("SLURM_JOB_NUM_NODES=4\nWORLD_SIZE=8\nLOCAL_WORLD_SIZE=8\n").unwrap();
        assert_eq!(e.launcher_nodes().unwrap().0, 4);
        assert!(env("RANK=3\n").unwrap().launcher_nodes().is_none());
    }
}
