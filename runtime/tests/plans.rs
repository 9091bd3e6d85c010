//! Where schedules come from: the planner by default, a plan file, forced algorithms.

use planner::schedule::{build, Algorithm, Collective, CollectiveKind, Protocol};
use runtime::{Communicator, Config, ReduceOp};

fn all_reduce_on(comms: Vec<Communicator>) -> Vec<Vec<i64>> {
    let hs: Vec<_> = comms
        .into_iter()
        .map(|mut c| {
            std::thread::spawn(move || {
                let mut v: Vec<i64> = (0..1001).map(|i| i * (c.rank() as i64 + 1)).collect();
                c.all_reduce_in_place(&mut v, ReduceOp::Sum).unwrap();
                v
            })
        })
        .collect();
    hs.into_iter().map(|h| h.join().unwrap()).collect()
}

#[test]
fn plan_file_schedule_is_used() {
    let coll = Collective::new(CollectiveKind::AllReduce);
    // A ring in reverse order on 3 channels: not what the planner would pick.
    let rings = vec![vec![2, 1, 0]; 3];
    let s = build::ring(&coll, &rings, Protocol::LL128).unwrap();
    let dir = std::env::temp_dir().join(format!("topoplan-plan-{}.json", std::process::id()));
    std::fs::write(&dir, serde_json::to_string(&vec![s.clone()]).unwrap()).unwrap();
    let cfg = Config {
        plan_file: Some(dir.clone()),
        ..Config::default()
    };
    let mut comms = Communicator::init_all(3, cfg).unwrap();
    let got = comms[0].schedule_for(&coll, 1 << 20).unwrap();
    assert_eq!(*got, s);
    for v in all_reduce_on(comms) {
        assert!(v.iter().enumerate().all(|(i, &x)| x == 6 * i as i64));
    }
    // A plan file that is not schedule IR is refused at init with its name.
    std::fs::write(&dir, "{\"hello\": 1}").unwrap();
    let e = Communicator::init_all(
        3,
        Config {
            plan_file: Some(dir.clone()),
            ..Config::default()
        },
    )
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("plan file") && e.contains("not schedule IR"),
        "{e}"
    );
    let _ = std::fs::remove_file(&dir);
}

#[test]
fn forced_algorithm_and_protocol_come_from_the_planner() {
    let cfg = Config {
        algorithm: Some("tree".into()),
        protocol: Some(Protocol::Simple),
        ..Config::default()
    };
    let mut comms = Communicator::init_all(4, cfg).unwrap();
    let s = comms[0]
        .schedule_for(&Collective::new(CollectiveKind::AllReduce), 1 << 20)
        .unwrap();
    assert_eq!(
        (s.algorithm.clone(), s.protocol),
        (Algorithm::Tree, Protocol::Simple)
    );
    for v in all_reduce_on(comms) {
        assert!(v.iter().enumerate().all(|(i, &x)| x == 10 * i as i64));
    }
    let e = Communicator::init_all(
        2,
        Config {
            algorithm: Some("bogus".into()),
            ..Config::default()
        },
    )
    .unwrap_err();
    assert!(
        e.is_usage() && e.to_string().contains("TOPOPLAN_ALGO"),
        "{e}"
    );
}

/// A hand-written schedule (through a plan file) whose second channel is empty on every rank.
#[test]
fn hand_written_schedule_with_an_empty_channel() {
    use planner::schedule::{BufferKind, ChunkRef, Op};
    let coll = Collective::new(CollectiveKind::AllReduce);
    let mut s = build::empty(
        &coll,
        Algorithm::Msccl("hand".into()),
        Protocol::Simple,
        2,
        2,
        1,
    );
    let (i0, o0) = (
        ChunkRef::new(BufferKind::Input, 0, 1),
        ChunkRef::new(BufferKind::Output, 0, 1),
    );
    for r in 0..2u32 {
        s.ranks[r as usize].channels[0].ops =
            vec![Op::send(i0, 1 - r), Op::recv_reduce_copy(i0, o0, 1 - r)];
    }
    s.validate().unwrap();
    let path = std::env::temp_dir().join(format!("topoplan-hand-{}.json", std::process::id()));
    std::fs::write(&path, serde_json::to_string(&s).unwrap()).unwrap();
    let comms = Communicator::init_all(
        2,
        Config {
            plan_file: Some(path.clone()),
            ..Config::default()
        },
    )
    .unwrap();
    for v in all_reduce_on(comms) {
        assert!(v.iter().enumerate().all(|(i, &x)| x == 3 * i as i64));
    }
    let _ = std::fs::remove_file(&path);
}
