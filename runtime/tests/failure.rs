//! Failures on thread ranks: abort, timeout, ranks that disagree, bad arguments.

use runtime::{CommError, Communicator, Config, ReduceOp};
use std::time::{Duration, Instant};

fn two(timeout: Duration) -> (Communicator, Communicator) {
    let mut v = Communicator::init_all(
        2,
        Config {
            timeout,
            ..Config::default()
        },
    )
    .unwrap();
    let b = v.pop().unwrap();
    (v.pop().unwrap(), b)
}

#[test]
fn abort_wakes_a_waiting_collective() {
    let (mut a, _b) = two(Duration::from_secs(600));
    let h = a.abort_handle();
    let t = Instant::now();
    let waiter = std::thread::spawn(move || {
        let mut v = vec![1.0f32; 1000];
        let e = a.all_reduce_in_place(&mut v, ReduceOp::Sum).unwrap_err();
        (e, a)
    });
    std::thread::sleep(Duration::from_millis(100));
    h.abort();
    let (e, mut a) = waiter.join().unwrap();
    assert!(
        matches!(
            e,
            CommError::Aborted {
                seq: 0,
                rank: 0,
                ..
            }
        ),
        "{e}"
    );
    assert!(
        t.elapsed() < Duration::from_secs(5),
        "abort took {:?}",
        t.elapsed()
    );
    let mut v = vec![1u8; 3];
    assert!(matches!(
        a.all_reduce_in_place(&mut v, ReduceOp::Sum),
        Err(CommError::Poisoned(_))
    ));
}

#[test]
fn timeout_names_collective_sequence_rank_and_peer() {
    let (mut a, _b) = two(Duration::from_millis(300));
    let mut v = vec![1i32; 100];
    let t = Instant::now();
    let e = a.all_reduce_in_place(&mut v, ReduceOp::Sum).unwrap_err();
    assert!(t.elapsed() < Duration::from_secs(3));
    match &e {
        CommError::Timeout {
            what,
            seq,
            rank,
            peer,
            ..
        } => {
            assert_eq!(
                (what.as_str(), *seq, *rank, *peer),
                ("all-reduce", 0, 0, Some(1)),
                "{e}"
            );
        }
        other => panic!("expected a timeout, got {other}"),
    }
    let s = e.to_string();
    assert!(
        s.contains("all-reduce #0 on rank 0") && s.contains("rank 1"),
        "{s}"
    );
}

#[test]
fn ranks_that_disagree_get_a_mismatch_error() {
    let (mut a, mut b) = two(Duration::from_secs(5));
    let t = std::thread::spawn(move || {
        let mut v = vec![1.0f64; 10];
        b.all_reduce_in_place(&mut v, ReduceOp::Sum)
    });
    let mut v = vec![1.0f64; 20];
    let ea = a.all_reduce_in_place(&mut v, ReduceOp::Sum).unwrap_err();
    let eb = t.join().unwrap().unwrap_err();
    let both = format!("{ea} / {eb}");
    assert!(both.contains("does not match"), "{both}");
}

#[test]
fn bad_arguments_are_usage_errors_and_do_not_poison() {
    let (mut a, _b) = two(Duration::from_secs(5));
    let mut out = vec![0f32; 5];
    let e = a.all_gather(&[1f32; 3], &mut out).unwrap_err();
    assert!(
        matches!(e, CommError::InvalidArgument(_)) && e.is_usage(),
        "{e}"
    );
    let e = a.broadcast_in_place(&mut out, 7).unwrap_err();
    assert!(e.to_string().contains("root 7"), "{e}");
    let e = a.send(&[1u8], 2).unwrap_err();
    assert!(e.to_string().contains("peer 2"), "{e}");
    let e = a.all_to_all_in_place(&mut out).unwrap_err();
    assert!(e.to_string().contains("not nranks"), "{e}");
    // Still usable: a zero-length collective completes without the peer.
    a.all_reduce_in_place(&mut [0f32; 0], ReduceOp::Sum)
        .unwrap();
    assert_eq!(a.seq(), 1);
}

#[test]
fn send_to_self_and_p2p_in_groups() {
    let mut comms = Communicator::init_all(2, Config::default()).unwrap();
    let mut b = comms.pop().unwrap();
    let mut a = comms.pop().unwrap();
    let t = std::thread::spawn(move || {
        // Rank 1: a blocking recv, then a blocking send.
        let mut x = vec![0i32; 70_000];
        b.recv(&mut x, 0).unwrap();
        b.send(&x, 0).unwrap();
        x
    });
    let data: Vec<i32> = (0..70_000u32).map(|i| (i * 7) as i32).collect();
    let mut mine = vec![0i32; data.len()];
    let mut back = vec![0i32; data.len()];
    let mut g = a.group();
    g.send(&data, 0).unwrap(); // to itself
    g.recv(&mut mine, 0).unwrap();
    g.send(&data, 1).unwrap();
    g.recv(&mut back, 1).unwrap();
    g.run().unwrap();
    assert_eq!(mine, data);
    assert_eq!(back, data);
    assert_eq!(t.join().unwrap(), data);
}

/// Runs `call` on each of `n` thread ranks (timeout 60 s) and returns each rank's error and how
/// long it took to come.
fn each_fails(
    n: u32,
    call: impl Fn(&mut Communicator) -> Result<(), CommError> + Send + Sync + 'static,
) -> Vec<(String, Duration)> {
    let cfg = Config {
        timeout: Duration::from_secs(60),
        ..Config::default()
    };
    let call = std::sync::Arc::new(call);
    let hs: Vec<_> = Communicator::init_all(n, cfg)
        .unwrap()
        .into_iter()
        .map(|mut c| {
            let call = call.clone();
            std::thread::spawn(move || {
                let t = Instant::now();
                let e = call(&mut c).expect_err("a call the ranks disagree on succeeded");
                assert!(matches!(e, CommError::Mismatch { .. }), "{e}");
                // Unusable afterwards: peers may hold its half-matched messages.
                assert!(c.poisoned().is_some());
                (e.to_string(), t.elapsed())
            })
        })
        .collect();
    hs.into_iter().map(|h| h.join().unwrap()).collect()
}

/// Every rank fails at once, naming the call and both versions of it, when the ranks disagree
/// on a root, even when only one rank differs: no rank keeps its own data as if broadcast, none
/// waits for the timeout.
#[test]
fn ranks_that_disagree_on_the_root_all_fail_at_once() {
    for (what, errs) in [
        (
            "broadcast",
            each_fails(3, |c| {
                let me = c.rank();
                c.broadcast_in_place(&mut [me as f32; 33], me)
            }),
        ),
        (
            "reduce",
            each_fails(3, |c| {
                let root = u32::from(c.rank() == 2);
                c.reduce_in_place(&mut [1i32; 10], ReduceOp::Sum, root)
            }),
        ),
    ] {
        for (e, took) in errs {
            let named = format!("calls {what} of");
            assert!(
                e.contains(&format!("{what} #0")) && e.matches(&named).count() == 2,
                "{e}"
            );
            assert!(took < Duration::from_secs(10), "{what}: {took:?}: {e}");
        }
    }
}

/// A send nobody receives does not complete: it times out naming the peer, and a receive of
/// another size is refused at its first message.
#[test]
fn sends_complete_only_when_received() {
    let (mut a, mut b) = two(Duration::from_millis(500));
    let t = Instant::now();
    let e = a.send(&[1u8; 64], 1).unwrap_err().to_string();
    assert!(
        e.contains("rank 1 to receive what this rank sent it"),
        "{e}"
    );
    assert!(t.elapsed() < Duration::from_secs(5));
    // b receives 128 bytes where a's (stale) send had 64: refused, not half-filled.
    let mut got = [0u8; 128];
    let e = b.recv(&mut got, 0).unwrap_err().to_string();
    assert!(
        e.contains("receives 128 bytes") && e.contains("64-byte send"),
        "{e}"
    );
    assert!(
        got.iter().all(|x| *x == 0),
        "the refused message was copied"
    );
}
