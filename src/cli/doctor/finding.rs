//! A finding (severity, evidence, cost, fix) and the report: most severe first, as text or JSON.

use serde::Serialize;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// Worth knowing; does not make the exit status 1 (e.g. a GPU link idling at a lower speed).
    Info,
    /// Costs bandwidth or latency.
    Warning,
    /// Breaks or hangs jobs, or costs most of the machine's bandwidth.
    Error,
}

impl Severity {
    pub fn label(self) -> &'static str {
        match self {
            Severity::Error => "ERROR",
            Severity::Warning => "WARNING",
            Severity::Info => "INFO",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Finding {
    /// Stable name of the check (docs/doctor.md lists them).
    pub check: &'static str,
    pub severity: Severity,
    pub title: String,
    /// Where it shows: `file:line: text`, `VAR=value (source)`, a sysfs path, a measurement.
    pub evidence: Vec<String>,
    /// What it costs, predicted where the planner can ("rings over PCIe: 24 GB/s predicted, against 360 over NVLink").
    pub cost: Option<String>,
    pub fix: String,
}

impl Finding {
    pub fn new(check: &'static str, severity: Severity, title: impl Into<String>) -> Finding {
        debug_assert!(
            super::checks::CHECKS.contains(&check) || cfg!(test),
            "check {check} is not in checks::CHECKS"
        );
        Finding {
            check,
            severity,
            title: title.into(),
            evidence: Vec::new(),
            cost: None,
            fix: String::new(),
        }
    }
    pub fn evidence(mut self, e: impl Into<String>) -> Finding {
        self.evidence.push(e.into());
        self
    }
    pub fn cost(mut self, c: Option<String>) -> Finding {
        self.cost = c;
        self
    }
    pub fn fix(mut self, f: impl Into<String>) -> Finding {
        self.fix = f.into();
        self
    }
}

/// What was read, for the report's head.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Summary {
    pub inputs: Vec<String>,
    pub notes: Vec<String>,
    /// NCCL log lines not understood: count and the first few (`file:line: text`).
    pub not_understood: usize,
    pub not_understood_samples: Vec<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub healthy: bool,
    pub summary: Summary,
    pub findings: Vec<Finding>,
}

impl Report {
    /// Sorts most severe first (stable within a severity: checks keep their order).
    pub fn new(summary: Summary, mut findings: Vec<Finding>) -> Report {
        findings.sort_by_key(|f| std::cmp::Reverse(f.severity));
        Report {
            healthy: !findings.iter().any(|f| f.severity >= Severity::Warning),
            summary,
            findings,
        }
    }

    /// 0 healthy (info notes at most), 1 findings.
    pub fn exit_code(&self) -> i32 {
        if self.healthy {
            0
        } else {
            1
        }
    }

    pub fn text(&self) -> String {
        let mut s = String::new();
        s.push_str("topoplan doctor\n");
        for i in &self.summary.inputs {
            s.push_str(&format!("  read: {i}\n"));
        }
        for n in &self.summary.notes {
            s.push_str(&format!("  note: {n}\n"));
        }
        if self.summary.not_understood > 0 {
            s.push_str(&format!(
                "  not understood: {} NCCL line(s), used for no finding; first: {}\n",
                self.summary.not_understood,
                self.summary.not_understood_samples.join(" | ")
            ));
        }
        s.push('\n');
        if self.findings.is_empty() {
            s.push_str("healthy: no finding\n");
            return s;
        }
        let count = |sev| self.findings.iter().filter(|f| f.severity == sev).count();
        s.push_str(&format!(
            "{} finding(s): {} error, {} warning, {} info\n\n",
            self.findings.len(),
            count(Severity::Error),
            count(Severity::Warning),
            count(Severity::Info)
        ));
        for (i, f) in self.findings.iter().enumerate() {
            s.push_str(&format!(
                "{}. [{}] {} ({})\n",
                i + 1,
                f.severity.label(),
                f.title,
                f.check
            ));
            for e in &f.evidence {
                s.push_str(&format!("   evidence: {e}\n"));
            }
            if let Some(c) = &f.cost {
                s.push_str(&format!("   cost:     {c}\n"));
            }
            s.push_str(&format!("   fix:      {}\n\n", f.fix));
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn most_severe_first_and_info_alone_is_healthy() {
        let r = Report::new(
            Summary::default(),
            vec![
                Finding::new("a", Severity::Info, "i"),
                Finding::new("b", Severity::Warning, "w"),
                Finding::new("c", Severity::Error, "e"),
            ],
        );
        let order: Vec<_> = r.findings.iter().map(|f| f.check).collect();
        assert_eq!(order, vec!["c", "b", "a"]);
        assert_eq!(r.exit_code(), 1);
        let t = r.text();
        assert!(t.find("[ERROR]").unwrap() < t.find("[WARNING]").unwrap());
        let r = Report::new(
            Summary::default(),
            vec![Finding::new("a", Severity::Info, "i")],
        );
        assert_eq!(r.exit_code(), 0);
    }
}
