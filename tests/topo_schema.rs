//! docs/topology.schema.json and the serde types describe the same fields: a document with every
//! field set serializes to exactly the properties the schema lists, element by element.

use planner::topology::doc::*;
use serde_json::Value;

fn full_doc() -> TopoDoc {
    let extra: Extra = [("keep".to_string(), "1".to_string())]
        .into_iter()
        .collect();
    let net = NetDoc {
        name: Some("mlx5_0".into()),
        dev: Some(0),
        latency: Some(0.5),
        speed: Some(400000),
        port: Some(1),
        guid: Some("0x1".into()),
        maxconn: Some(64),
        gdr: Some(1),
        coll: Some(1),
        extra: extra.clone(),
        at: At::default(),
    };
    let nic = NicDoc {
        nets: vec![net],
        extra: extra.clone(),
        at: At::default(),
    };
    let gpu = GpuDoc {
        dev: Some(0),
        sm: Some(90),
        rank: Some(0),
        gdr: Some(1),
        nvlinks: vec![NvLinkDoc {
            target: "fffffff:ff:ff.0".into(),
            count: 18,
            tclass: Some("0x068000".into()),
            extra: extra.clone(),
            at: At::default(),
        }],
        c2c: vec![C2cDoc {
            bw: 22500,
            count: 10,
            extra: extra.clone(),
            at: At::default(),
        }],
        extra: extra.clone(),
        at: At::default(),
    };
    let leaf = PciDoc {
        busid: "0000:01:00.0".into(),
        class: Some("0x030200".into()),
        vendor: Some("0x10de".into()),
        device: Some("0x2335".into()),
        subsystem_vendor: Some("0x10de".into()),
        subsystem_device: Some("0x18bf".into()),
        link_speed: Some("32.0 GT/s PCIe".into()),
        link_width: Some(16),
        pci: vec![],
        gpu: Some(gpu),
        nic: Some(nic.clone()),
        pcilinks: vec![PciLinkDoc {
            target: "0000:02:00.0".into(),
            extra: extra.clone(),
            at: At::default(),
        }],
        extra: extra.clone(),
        at: At::default(),
    };
    let mut sw = leaf.clone();
    sw.pci = vec![leaf];
    let cpu = CpuDoc {
        host_hash: Some("0x1".into()),
        numaid: Some(0),
        affinity: Some("ff".into()),
        arch: Some("x86_64".into()),
        vendor: Some("GenuineIntel".into()),
        familyid: Some(6),
        modelid: Some(143),
        pci: vec![sw],
        nics: vec![nic],
        extra: extra.clone(),
        at: At::default(),
    };
    TopoDoc {
        version: 1,
        system: SystemDoc {
            name: Some("m".into()),
            cpus: vec![cpu],
            extra,
            at: At::default(),
        },
        assume: Some(Assume {
            gpu: Some("h100-sxm".into()),
            nic_gbps: Some(400.0),
        }),
        cluster: Some(ClusterDoc {
            nodes: 2,
            fabric: "fat-tree".into(),
            nic_gbps: 400.0,
            oversubscription: 2.0,
            hosts_per_leaf: Some(1),
            switch_lat_us: 0.6,
        }),
    }
}

fn resolve<'a>(schema: &'a Value, s: &'a Value) -> &'a Value {
    match s.get("$ref").and_then(Value::as_str) {
        Some(r) => {
            let name = r.trim_start_matches("#/$defs/");
            &schema["$defs"][name]
        }
        None => s,
    }
}

/// (element schema, property) pairs seen anywhere in the document.
type Seen = std::collections::HashSet<(usize, String)>;

fn check(schema: &Value, s: &Value, v: &Value, path: &str, seen: &mut Seen) {
    let s = resolve(schema, s);
    match v {
        Value::Object(m) => {
            let props = s["properties"].as_object();
            if let Some(props) = props {
                for (k, child) in m {
                    let ps = props.get(k).unwrap_or_else(|| {
                        panic!("{path}.{k}: written by topoplan, missing from the schema")
                    });
                    seen.insert((s as *const Value as usize, k.clone()));
                    check(schema, ps, child, &format!("{path}.{k}"), seen);
                }
            }
        }
        Value::Array(a) => {
            for (i, x) in a.iter().enumerate() {
                check(schema, &s["items"], x, &format!("{path}[{i}]"), seen);
            }
        }
        _ => {}
    }
}

#[test]
fn schema_matches_the_serde_types() {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/docs/topology.schema.json"
    ))
    .unwrap();
    let schema: Value = serde_json::from_str(&text).unwrap();
    let doc = serde_json::to_value(full_doc()).unwrap();
    let mut seen = Seen::new();
    check(&schema, &schema, &doc, "$", &mut seen);
    // Every property the schema lists is written by topoplan somewhere in the full document.
    let mut defs: Vec<(&str, &Value)> = vec![("$", &schema)];
    for (name, d) in schema["$defs"].as_object().unwrap() {
        defs.push((name.as_str(), d));
    }
    for (name, d) in defs {
        if let Some(props) = d["properties"].as_object() {
            if name == "extra" || name == "hex" {
                continue;
            }
            for k in props.keys() {
                assert!(
                    seen.contains(&(d as *const Value as usize, k.clone())),
                    "{name}.{k}: in the schema, never written by topoplan"
                );
            }
        }
    }
    // The full document is accepted by the reader (deny_unknown_fields) and round trips.
    let back = planner::topology::read_json(&doc.to_string(), "full.json").unwrap();
    assert_eq!(back, full_doc());
}
