use super::*;
use std::collections::{HashMap, HashSet};

fn lookup(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
    let m: HashMap<String, String> = pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    move |k| m.get(k).cloned()
}

#[test]
fn every_declaration_is_well_formed() {
    let mut names = HashSet::new();
    for p in ALL {
        assert!(p.name.starts_with(PREFIX), "{}", p.name);
        assert!(
            p.short_name()
                .bytes()
                .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == b'_'),
            "{}",
            p.name
        );
        assert!(names.insert(p.name), "{} declared twice", p.name);
        assert!(
            !p.doc.is_empty() && !p.doc.contains('\n'),
            "{}: one-line doc",
            p.name
        );
        if let Default::Value(d) = p.default {
            p.parse(d)
                .unwrap_or_else(|e| panic!("{}: default does not parse: {e}", p.name));
        }
        match p.kind {
            Kind::UInt { min, max } | Kind::Size { min, max, .. } => {
                assert!(min <= max, "{}", p.name)
            }
            Kind::Decimal { min, max } => assert!(min <= max, "{}", p.name),
            Kind::Choice(c) => assert!(!c.is_empty(), "{}", p.name),
            _ => {}
        }
    }
}

#[test]
fn values_parse_and_bad_ones_name_the_variable() {
    let get = lookup(&[
        ("TOPOPLAN_TIMEOUT", "30s"),
        ("TOPOPLAN_PROTO", "ll128"),
        ("TOPOPLAN_CHANNELS", "4"),
        ("TOPOPLAN_SLOT_BYTES", ""),
    ]);
    assert_eq!(
        TIMEOUT.duration_from(&get).unwrap(),
        Some(std::time::Duration::from_secs(30))
    );
    assert_eq!(PROTO.choice_from(&get).unwrap(), Some("LL128"));
    assert_eq!(CHANNELS.u32_from(&get).unwrap(), Some(4));
    // Empty is unset: the declared default.
    assert_eq!(SLOT_BYTES.bytes_from(&get).unwrap(), Some(256 << 10));
    assert_eq!(PLAN.path_from(&get).unwrap(), None);

    let bad = lookup(&[("TOPOPLAN_CHANNELS", "0"), ("TOPOPLAN_TIMEOUT", "forever")]);
    let e = CHANNELS.u64_from(&bad).unwrap_err();
    assert!(matches!(e, ParamError::OutOfRange { .. }), "{e:?}");
    assert_eq!(
        e.to_string(),
        "TOPOPLAN_CHANNELS=\"0\" is out of range: expected an integer from 1 to 1024"
    );
    let e = TIMEOUT.duration_from(&bad).unwrap_err();
    assert!(e
        .to_string()
        .starts_with("TOPOPLAN_TIMEOUT=\"forever\": expected a duration"));
    let e = PROTO
        .choice_from(&lookup(&[("TOPOPLAN_PROTO", "fast")]))
        .unwrap_err();
    assert!(e.to_string().contains("one of Simple, LL128, LL"), "{e}");
}

#[test]
fn asking_for_the_wrong_type_is_an_error() {
    let e = TIMEOUT.u64_from(&lookup(&[])).unwrap_err();
    assert!(
        matches!(
            e,
            ParamError::WrongKind {
                name: "TOPOPLAN_TIMEOUT",
                ..
            }
        ),
        "{e:?}"
    );
    assert!(CHANNELS.bytes_from(&lookup(&[])).is_err());
}

#[test]
fn find_knows_every_declared_name() {
    for p in ALL {
        assert_eq!(find(p.name), Some(*p));
    }
    assert_eq!(find(&format!("{PREFIX}NOPE")), None);
}
