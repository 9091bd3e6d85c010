//! The checks a profile file passes before it is read: the bundled profile's shape (fields,
//! kinds of value, array lengths) and every number finite, at least 0, above 0 where it must be.

use serde_json::Value;

fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_string()
    } else {
        format!("{path}.{key}")
    }
}

/// Fields a profile may leave out.
const OPTIONAL: &[&str] = &["description", "sim.one_way_gain"];

/// `v` has the bundled profile's shape: the same fields (no unknown, none missing), the same
/// kinds of value, integers where it has integers, arrays of numbers of the same length.
pub(super) fn check_shape(v: &Value, t: &Value, path: &str) -> Result<(), (String, String)> {
    match (v, t) {
        (Value::Object(a), Value::Object(b)) => {
            for k in a.keys() {
                if !b.contains_key(k) {
                    return Err((join(path, k), "unknown field".into()));
                }
            }
            for (k, tv) in b {
                let p = join(path, k);
                match a.get(k) {
                    Some(x) => check_shape(x, tv, &p)?,
                    None if OPTIONAL.contains(&p.as_str()) => {}
                    None => return Err((p, "missing".into())),
                }
            }
            Ok(())
        }
        (Value::Array(a), Value::Array(b)) => {
            let numeric = b.first().is_some_and(Value::is_number);
            if numeric && a.len() != b.len() {
                return Err((
                    path.into(),
                    format!("{} values where {} are wanted", a.len(), b.len()),
                ));
            }
            if let Some(tv) = b.first() {
                for (i, x) in a.iter().enumerate() {
                    check_shape(x, tv, &format!("{path}[{i}]"))?;
                }
            }
            Ok(())
        }
        (Value::Number(a), Value::Number(b)) => {
            if b.is_u64() && !a.is_u64() {
                Err((path.into(), format!("{a} is not a whole number >= 0")))
            } else {
                Ok(())
            }
        }
        (Value::String(_), Value::String(_)) | (Value::Bool(_), Value::Bool(_)) => Ok(()),
        (a, b) => Err((
            path.into(),
            format!("expected {}, found {}", type_name(b), type_name(a)),
        )),
    }
}

/// Fields that must be above 0 (rates, sizes, efficiencies, wire factors); every other number
/// must be at least 0 (a 0 turns a mode off, e.g. `pull_gbps`).
const POSITIVE: &[&str] = &[
    "sm",
    "hosts",
    "gpus_per_host",
    "launch_us",
    "ramp_a",
    "sm_peer_eff",
    "direct_peer_eff",
    "direct_ll_fraction",
    "direct_ramp_a",
    "ce_eff",
    "ce_chunk_bytes",
    "local_copy_gbps",
    "wire_factor",
    "step_bytes",
    "min_steps",
    "channel_gbps",
    "local_channel_gbps",
    "direct_gbps",
    "direct_local_gbps",
    "cta_bytes",
    "max_ctas",
    "ll_ctas",
    "cta_gbps",
    "gpu_gbps",
    "ll_gpu_gbps",
    "ll_wire_factor",
    "ce_gbps",
    "hybrid_link_factor",
    "coll_eff",
];

pub(super) fn check_values(v: &Value, path: &str) -> Result<(), (String, String)> {
    match v {
        Value::Object(m) => m
            .iter()
            .try_for_each(|(k, x)| check_values(x, &join(path, k))),
        Value::Array(a) => a
            .iter()
            .enumerate()
            .try_for_each(|(i, x)| check_values(x, &format!("{path}[{i}]"))),
        Value::Number(n) => {
            let x = n.as_f64().unwrap_or(f64::NAN);
            let leaf = path
                .rsplit('.')
                .next()
                .unwrap_or(path)
                .split('[')
                .next()
                .unwrap_or("");
            if !x.is_finite() || x < 0.0 {
                Err((path.into(), format!("{n} is not a finite number >= 0")))
            } else if x == 0.0 && POSITIVE.contains(&leaf) {
                Err((path.into(), "must be above 0".into()))
            } else {
                Ok(())
            }
        }
        _ => Ok(()),
    }
}
