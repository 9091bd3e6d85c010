//! Grouped sends to one peer arrive in the order they were issued, and grouped receives from
//! one peer take them in that order, whenever the data arrives: receives of different lengths
//! from one peer, with the sender starting a little later each round, so that the data lands
//! while the receiver is polling.

use runtime::{Communicator, Config};
use std::time::Duration;

#[test]
fn grouped_sends_to_one_peer_are_received_in_issue_order() {
    let comms = Communicator::init_all(2, Config::default()).expect("two ranks");
    let rounds = 200u32;
    let handles: Vec<_> = comms
        .into_iter()
        .map(|mut comm| {
            std::thread::spawn(move || {
                for round in 0..rounds {
                    let first: Vec<i32> = (0..129).map(|i| (round * 1000 + i) as i32).collect();
                    let second: Vec<i64> = (0..129).map(|i| i64::from(round) << 32 | i).collect();
                    if comm.rank() == 1 {
                        std::thread::sleep(Duration::from_micros(u64::from(round % 7) * 20));
                        let mut g = comm.group();
                        g.send(&first, 0).unwrap();
                        g.send(&second, 0).unwrap();
                        g.run().unwrap();
                    } else {
                        let mut a = vec![0i32; 129];
                        let mut b = vec![0i64; 129];
                        let mut g = comm.group();
                        g.recv(&mut a, 1).unwrap();
                        g.recv(&mut b, 1).unwrap();
                        g.run().unwrap_or_else(|e| panic!("round {round}: {e}"));
                        assert_eq!(a, first, "round {round}");
                        assert_eq!(b, second, "round {round}");
                    }
                }
            })
        })
        .collect();
    for h in handles {
        h.join().expect("rank thread");
    }
}
