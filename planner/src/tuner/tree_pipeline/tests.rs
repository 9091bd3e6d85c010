//! Unit tests of the tree pipeline against hand-worked trees.

use super::steady::{busy_rates, half_periods};
use super::*;

fn terms() -> IterTerms {
    IterTerms {
        chunk: 10_000.0,
        wire: 1.0,
        channel_gbps: 10.0,
        paced_gbps: 10.0,
        local_gbps: 100.0,
        link_eff: 1.0,
        step_us: 0.5,
        hop_us: 1.0,
        slots: 8,
    }
}

/// LL-like terms whose third iteration is paced at half the channel's rate.
fn paced_at_the_third() -> IterTerms {
    IterTerms {
        paced_gbps: 5.0,
        slots: 2,
        ..terms()
    }
}

/// One tree's all-reduce of `iters` iterations in closed form, µs.
fn us_of(t: &TreeSends, x: &IterTerms, iters: f64) -> f64 {
    closed_form_us(std::slice::from_ref(t), x, iters, &Memo::default())
        .unwrap()
        .0
}

fn sends(
    parent: &[Option<u32>],
    route: impl Fn(u32, u32) -> (f64, Vec<(usize, f64)>, f64),
) -> TreeSends {
    let t = TreeChannel::from_parents(parent.to_vec()).unwrap();
    TreeSends::of(&t, &route).unwrap()
}

#[test]
fn a_chain_fills_hop_by_hop_then_streams_one_transfer_per_iteration() {
    // 0 <- 1 <- 2, every route its own fast link, 0.25 µs of latency.
    let t = sends(&[None, Some(0), Some(1)], |a, b| {
        (0.25, vec![(a as usize * 3 + b as usize, 1e3)], 0.0)
    });
    let x = terms();
    // A transfer: 10 kB at 10 GB/s, 1 µs, plus a 0.5 µs step; it lands 1.25 µs later.
    let (xfer, land) = (1.5, 1.25);
    // Up: 2 sends, 1 sends, the root reduces (0.1 + 0.5); down: 0 sends, 1 sends, 2 receives.
    let fill = 2.0 * (xfer + land) + 0.6 + 2.0 * (xfer + land) + 0.5;
    let one = closed_form_us(std::slice::from_ref(&t), &x, 1.0, &Memo::default())
        .unwrap()
        .0;
    assert!((one - fill).abs() < 1e-9, "{one} {fill}");
    // Each further iteration adds the busiest program's op: one send.
    let four = closed_form_us(&[t], &x, 4.0, &Memo::default()).unwrap().0;
    assert!((four - fill - 3.0 * xfer).abs() < 1e-9, "{four}");
}

#[test]
fn a_rank_sends_to_its_children_in_turn_sharing_the_links_with_other_programs() {
    // 0 -> {1, 2}: both sends from 0 leave on link 7 (10 GB/s); the sends up from 1 and 2
    // use their own links. Link 7 carries one program's sends (0's down), so each gets the
    // channel's 10 GB/s, one after another.
    let route = |a: u32, b: u32| {
        let l = if a == 0 {
            7
        } else {
            a as usize * 3 + b as usize
        };
        (0.0, vec![(l, 10.0)], 0.0)
    };
    let t = sends(&[None, Some(0), Some(0)], route);
    let x = IterTerms {
        hop_us: 0.0,
        ..terms()
    };
    // Period: 0's down program sends twice (2 × 1.5); link 7 carries 2 µs of bytes.
    let p = closed_form_us(std::slice::from_ref(&t), &x, 2.0, &Memo::default())
        .unwrap()
        .0
        - closed_form_us(std::slice::from_ref(&t), &x, 1.0, &Memo::default())
            .unwrap()
            .0;
    assert!((p - 3.0).abs() < 1e-9, "{p}");
    // A second tree whose root also sends over link 7 halves each send's rate there.
    let two = [t.clone(), t];
    let p2 = closed_form_us(&two, &x, 2.0, &Memo::default()).unwrap().0
        - closed_form_us(&two, &x, 1.0, &Memo::default()).unwrap().0;
    assert!((p2 - 2.0 * (2.0 + 0.5)).abs() < 1e-9, "{p2}");
}

#[test]
fn the_faster_half_runs_ahead_sharing_links_with_the_slower_which_then_runs_alone() {
    // 0 -> {1, 2}, 1 -> {3}: the sends into 1 (3's up, 0's down) share link 9 at the
    // channel's rate; every other send has its own fast link. Up, 1's program sends once an
    // iteration (1.5 µs); down, 0's sends twice (3 µs): up runs ahead.
    let route = |a: u32, b: u32| {
        let l = if b == 1 {
            9
        } else {
            a as usize * 10 + b as usize
        };
        (0.0, vec![(l, if b == 1 { 10.0 } else { 1e3 })], 0.0)
    };
    let t = sends(&[None, Some(0), Some(0), Some(1)], route);
    let x = IterTerms {
        hop_us: 0.0,
        ..terms()
    };
    let trees = std::slice::from_ref(&t);
    let programs = Loads::of(trees, Sharing::Programs);
    let alone = half_periods(trees, &busy_rates(trees, &x, 10.0, false, &programs), &x);
    assert!((alone[0] - 1.5).abs() < 1e-9 && (alone[1] - 3.0).abs() < 1e-9);
    // Together, each send into 1 shares link 9 with the other half's sends, as often as
    // they load it: both halves slow down.
    let shared = half_periods(trees, &busy_rates(trees, &x, 10.0, true, &programs), &x);
    assert!(shared[0] > 1.5 + 0.1 && shared[1] > 3.0 + 0.1, "{shared:?}");
    // 100 iterations: up's at the shared period; down's meanwhile at its shared period, the
    // rest alone.
    let ahead = 100.0 * shared[0];
    let want = ahead + (100.0 - ahead / shared[1]) * 3.0;
    let got = Halves::at(trees, &x, 10.0, &programs).us(100.0);
    assert!((got - want).abs() < 1e-6, "{got} {want}");
    assert!(got > 100.0 * 3.0 + 1.0, "{got}");
}

#[test]
fn paced_iterations_past_the_slots_refill_the_tree_then_take_the_paced_period() {
    let t = sends(&[None, Some(0)], |a, b| {
        (0.0, vec![(a as usize * 3 + b as usize, 1e3)], 0.0)
    });
    let x = paced_at_the_third();
    let at = |i: f64| us_of(&t, &x, i);
    // Iteration 2 at 10 GB/s: a 1.5 µs send.
    assert!((at(2.0) - at(1.0) - 1.5).abs() < 1e-9);
    // The leaf sends both unpaced iterations (2 × 1.5 µs), then the third crosses the tree
    // at 5 GB/s: up 2.5 + 1 (landing), the root's reduction 0.6, down 2.5 + 1, the receive
    // 0.5; the fourth adds a paced period (2.5).
    let refill = 3.0 + (2.5 + 1.0 + 0.6 + 2.5 + 1.0 + 0.5);
    assert!((at(3.0) - refill).abs() < 1e-9, "{}", at(3.0));
    assert!((at(4.0) - refill - 2.5).abs() < 1e-9);
    // Without pacing, the third and fourth add a period each.
    let fast = IterTerms {
        slots: 2,
        ..terms()
    };
    let unpaced = |i: f64| {
        closed_form_us(std::slice::from_ref(&t), &fast, i, &Memo::default())
            .unwrap()
            .0
    };
    assert!((unpaced(4.0) - unpaced(2.0) - 3.0).abs() < 1e-9);
}

#[test]
fn the_first_paced_iteration_waits_behind_a_ranks_queued_unpaced_ones() {
    // 0 <- 1 <- 2; 1's send up crosses hosts (3 µs of network step), so 1 forwards an
    // iteration in 4.5 µs while its child sends one in 1.5: iterations queue at 1.
    let t = sends(&[None, Some(0), Some(1)], |a, b| {
        let net = if (a, b) == (1, 0) { 3.0 } else { 0.0 };
        (0.0, vec![(a as usize * 3 + b as usize, 1e3)], net)
    });
    let x = paced_at_the_third();
    let at = |i: f64| us_of(&t, &x, i);
    // 1's up program: iteration 1 lands at 2.5 and leaves at 7.0, iteration 2 at 11.5, the
    // paced third (its data queued since 6.5) at 17.0 (2.5 + 3); the root reduces it at 18.6,
    // sends it down paced (2.5) at 21.1 once its own second send (14.6) is done, 1 forwards
    // it at 24.6, and 2 receives it at 26.1. Pacing only from the third iteration's data on
    // (the leaves' two sends, then the paced iteration's crossing) gives 21.1; a paced
    // period after the unpaced second iteration, 24.1.
    assert!((at(3.0) - 26.1).abs() < 1e-9, "{}", at(3.0));
    // The fourth adds a paced period: 1's up program, 5.5 µs.
    assert!((at(4.0) - 26.1 - 5.5).abs() < 1e-9, "{}", at(4.0));
}

/// One tree's all-reduce of `iters` whole iterations op by op (`windows`), µs.
fn windows_us(t: &TreeSends, x: &IterTerms, iters: u32) -> f64 {
    windows::all_reduce_us(std::slice::from_ref(t), x, iters, 1.0)
}

#[test]
fn op_by_op_a_chain_fills_and_streams_as_the_closed_form_says() {
    // The chain of the first test: no link is shared and no credit binds, so the two agree.
    let t = sends(&[None, Some(0), Some(1)], |a, b| {
        (0.25, vec![(a as usize * 3 + b as usize, 1e3)], 0.0)
    });
    let x = terms();
    for iters in [1, 2, 4, 8] {
        let closed = closed_form_us(std::slice::from_ref(&t), &x, iters as f64, &Memo::default())
            .unwrap()
            .0;
        assert!((windows_us(&t, &x, iters) - closed).abs() < 1e-9, "{iters}");
    }
    // What the dispatcher returns for a call this small.
    let (us, _) = all_reduce_us(std::slice::from_ref(&t), &x, 4.0, &Memo::default()).unwrap();
    assert!((us - windows_us(&t, &x, 4)).abs() < 1e-9);
}

#[test]
fn op_by_op_a_send_shares_a_link_with_the_sends_its_time_window_meets() {
    // 0 <- 1 <- 2, 1 µs a send alone (10 kB at 10 GB/s), no step, hop or latency.
    let x = IterTerms {
        local_gbps: 1e12,
        step_us: 0.0,
        hop_us: 0.0,
        ..terms()
    };
    let own = sends(&[None, Some(0), Some(1)], |a, b| {
        (0.0, vec![(a as usize * 3 + b as usize, 10.0)], 0.0)
    });
    // Every route its own link: 2 sends iteration 1 while 1 forwards iteration 0 (0-1, 1-2),
    // the root sends 0 down while 1 forwards 1 up (2-3), 1 sends 0 down while the root sends
    // 1 (3-4), 1 sends 1 down (4-5).
    assert!((windows_us(&own, &x, 2) - 5.0).abs() < 1e-9);
    // One link for every send (a shared bus): the sends that meet above share it, 2 µs each.
    let bus = sends(&[None, Some(0), Some(1)], |_, _| {
        (0.0, vec![(0, 10.0)], 0.0)
    });
    assert!((windows_us(&bus, &x, 2) - 8.0).abs() < 1e-9);
    // One slot per connection: 2 sends iteration 1 only once 1 has forwarded 0 (at 2), and
    // each send down waits for its child's receive of the iteration before: 6 µs.
    let one_slot = IterTerms { slots: 1, ..x };
    assert!((windows_us(&own, &one_slot, 2) - 6.0).abs() < 1e-9);
}

#[test]
fn identical_trees_run_as_one_counted_on_their_links_as_many_times() {
    // The bus of the test above, 2 µs a send when two meet: two copies of the tree share it as
    // the sends of one tree on a bus of half the rate would (each copy's sends meet its twin's
    // in every window), and a second, different tree keeps its own ops.
    let x = IterTerms {
        local_gbps: 1e12,
        step_us: 0.0,
        hop_us: 0.0,
        ..terms()
    };
    let on = |gbps: f64| {
        sends(&[None, Some(0), Some(1)], move |_, _| {
            (0.0, vec![(0, gbps)], 0.0)
        })
    };
    let twins = [on(20.0), on(20.0)];
    assert_eq!(
        windows::ops_per_iteration(&twins),
        windows::ops_per_iteration(&twins[..1])
    );
    for iters in [1, 2, 3] {
        let alone = windows_us(&on(10.0), &x, iters);
        let both = windows::all_reduce_us(&twins, &x, iters, 1.0);
        assert!(
            (both - alone).abs() < 1e-9,
            "{iters}: {both} against {alone}"
        );
    }
    // Rooted elsewhere, the second tree is not a copy: three trees, two of them twins.
    let other = sends(&[Some(1), None, Some(1)], |_, _| {
        (0.0, vec![(0, 20.0)], 0.0)
    });
    let three = [on(20.0), other, on(20.0)];
    assert_eq!(
        windows::ops_per_iteration(&three),
        windows::ops_per_iteration(&three[..2])
    );
}

#[test]
fn op_by_op_a_paced_send_waits_for_the_credit_of_the_message_two_back() {
    // The refill test's tree and terms: two slots, the third iteration paced. The leaf's
    // third send waits for the root to have reduced the first (lands 2.5, reduced 3.1, its
    // credit back 1 µs later: 4.1), then runs at 5 GB/s to 6.6 and lands at 7.6; the root
    // reduces it by 8.2; its own third send down waits for the leaf's first receive (lands
    // 5.6, taken 6.1, credit back 7.1) and for that reduction, runs 8.2 to 10.7 and lands at
    // 11.7; the leaf receives it at 12.2. The closed form, which holds no credits, says 11.1.
    let t = sends(&[None, Some(0)], |a, b| {
        (0.0, vec![(a as usize * 3 + b as usize, 1e3)], 0.0)
    });
    let x = paced_at_the_third();
    assert!(
        (windows_us(&t, &x, 3) - 12.2).abs() < 1e-9,
        "{}",
        windows_us(&t, &x, 3)
    );
    assert!((us_of(&t, &x, 3.0) - 11.1).abs() < 1e-9);
}

#[test]
fn a_packed_root_serves_its_children_on_lanes_of_their_own() {
    use crate::schedule::CollectiveKind;
    // 0 -> {1, 2}, each route its own link: a send is 1 µs of transfer and a 0.5 µs step, and
    // lands 1 µs later; the root's copy of its input takes 0.1 µs.
    let t = sends(&[None, Some(0), Some(0)], |a, b| {
        (0.0, vec![(a as usize * 3 + b as usize, 1e3)], 0.0)
    });
    let lanes = vec![
        crate::schedule::build::lanes(
            &TreeChannel::from_parents(vec![None, Some(0), Some(0)]).unwrap(),
        )
        .1,
    ];
    assert_eq!(lanes[0], [None, Some(0), Some(1)]);
    let x = terms();
    let us = |kind| windows::packed_us(std::slice::from_ref(&t), &lanes, kind, &x, 1, 1.0);
    // All-gather: lane 0 copies, then sends to 1 (0.1 to 1.6, lands 2.6, received 3.1); lane 1
    // sends to 2 at once (to 1.5, lands 2.5, received 3.0). On one program: 4.6.
    assert!((us(CollectiveKind::AllGather).unwrap() - 3.1).abs() < 1e-9);
    // Reduce-scatter: both leaves send up at once (land 2.5); the root reduces 1's (0.6 µs),
    // then 2's: 3.7.
    assert!((us(CollectiveKind::ReduceScatter).unwrap() - 3.7).abs() < 1e-9);
    assert!(us(CollectiveKind::Broadcast).is_none());
}
