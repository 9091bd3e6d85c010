//! MSCCL-IR XML: export → import gives back the (expanded) schedule; foreign files (as MSCCL's
//! tools write them) import into schedules that compute their collective; bad files are rejected
//! with file:line:col.

use planner::schedule::build;
use planner::schedule::*;

fn round_trip(s: &Schedule) {
    let xml = msccl::export(s, "test").unwrap();
    let back = msccl::import(&xml, "rt.xml").unwrap_or_else(|e| panic!("{e}\n{xml}"));
    assert_eq!(back, s.expanded(), "round trip changed the schedule\n{xml}");
    symbolic::check(&back).unwrap();
}

#[test]
fn every_builder_round_trips() {
    let ar = Collective::new(CollectiveKind::AllReduce);
    round_trip(&build::ring(&ar, &[vec![0, 2, 1, 3], vec![3, 1, 2, 0]], Protocol::LL128).unwrap());
    round_trip(
        &build::ring(
            &Collective::new(CollectiveKind::AllGather),
            &[vec![1, 0, 2]],
            Protocol::Simple,
        )
        .unwrap(),
    );
    round_trip(
        &build::ring(
            &Collective::new(CollectiveKind::ReduceScatter),
            &[vec![1, 0, 2, 3]],
            Protocol::Simple,
        )
        .unwrap(),
    );
    round_trip(
        &build::ring(
            &Collective::rooted(CollectiveKind::Broadcast, 2),
            &[vec![1, 0, 2, 3]],
            Protocol::LL,
        )
        .unwrap(),
    );
    let chain = TreeChannel::from_parents(vec![None, Some(0), Some(1), Some(1)]).unwrap();
    let back = TreeChannel::from_parents(vec![Some(1), None, Some(1), Some(2)]).unwrap();
    // Tree all-reduce has cross-channel deps (root's down half waits for its up half).
    round_trip(&build::tree(&ar, &[chain, back], Protocol::Simple).unwrap());
    round_trip(&build::one_shot(&ar, 4, Protocol::LL).unwrap());
    round_trip(&build::two_shot(&ar, 3, Protocol::Simple).unwrap());
    round_trip(&build::direct(&Collective::new(CollectiveKind::AllToAll), 4).unwrap());
    let mut sr = Collective::new(CollectiveKind::SendRecv);
    sr.send_peers = vec![Some(1), Some(0), None];
    round_trip(&build::direct(&sr, 3).unwrap());
    round_trip(&build::copy_engine_pipeline(&ar, 4).unwrap());
    let hosts = vec![vec![0, 1, 2], vec![3, 4, 5]];
    round_trip(
        &build::hierarchical(
            &ar,
            &hosts,
            &[vec![0, 1, 2], vec![1, 2, 0]],
            Protocol::Simple,
        )
        .unwrap(),
    );
}

/// A 3-GPU ring all-reduce written the way MSCCL's tools write it: one threadblock per GPU,
/// send to the next, receive from the previous, chunk i reduced around the ring.
fn foreign_ring(n: u32) -> String {
    let mut x = format!("<algo name=\"ring_ar\" proto=\"Simple\" nchannels=\"1\" nchunksperloop=\"{n}\" ngpus=\"{n}\" coll=\"allreduce\" inplace=\"0\" outofplace=\"1\" minBytes=\"0\" maxBytes=\"0\">\n");
    for r in 0..n {
        let (next, prev) = ((r + 1) % n, (r + n - 1) % n);
        x += &format!("  <gpu id=\"{r}\" i_chunks=\"{n}\" o_chunks=\"{n}\" s_chunks=\"0\">\n    <tb id=\"0\" send=\"{next}\" recv=\"{prev}\" chan=\"0\">\n");
        let c = |k: i64| (r as i64 - k).rem_euclid(n as i64);
        let mut s = 0;
        let mut step = |t: &str, sb: &str, so: i64, db: &str, dof: i64| {
            x += &format!("      <step s=\"{s}\" type=\"{t}\" srcbuf=\"{sb}\" srcoff=\"{so}\" dstbuf=\"{db}\" dstoff=\"{dof}\" cnt=\"1\" depid=\"-1\" deps=\"-1\" hasdep=\"0\"/>\n");
            s += 1;
        };
        step("s", "i", c(1), "i", c(1));
        for k in 2..n as i64 {
            step("rrs", "i", c(k), "i", c(k));
        }
        step("rrcs", "i", c(0), "o", c(0));
        for k in 1..n as i64 - 1 {
            step("rcs", "o", c(k), "o", c(k));
        }
        step("r", "o", c(n as i64 - 1), "o", c(n as i64 - 1));
        x += "    </tb>\n  </gpu>\n";
    }
    x + "</algo>\n"
}

#[test]
fn foreign_ring_imports_and_computes_all_reduce() {
    for n in [2, 3, 5] {
        let s = msccl::import(&foreign_ring(n), "ring.xml").unwrap();
        assert_eq!(s.algorithm, Algorithm::Msccl("ring_ar".into()));
        assert_eq!(s.chunks_per_block, n);
        symbolic::check(&s).unwrap();
    }
}

#[test]
fn foreign_split_threadblocks_and_nop_deps() {
    // Two GPUs swap chunk 0 using separate send and receive threadblocks; the copy waits (through
    // a nop) for the receive.
    let xml = r#"<algo name="swap" proto="LL" nchannels="1" nchunksperloop="2" ngpus="2" coll="alltoall" inplace="0" outofplace="1">
  <gpu id="0" i_chunks="2" o_chunks="2" s_chunks="0">
    <tb id="0" send="1" recv="-1" chan="0">
      <step s="0" type="s" srcbuf="i" srcoff="1" dstbuf="o" dstoff="0" cnt="1" depid="-1" deps="-1" hasdep="0"/>
    </tb>
    <tb id="1" send="-1" recv="1" chan="0">
      <step s="0" type="r" srcbuf="i" srcoff="0" dstbuf="o" dstoff="1" cnt="1" depid="-1" deps="-1" hasdep="1"/>
    </tb>
    <tb id="2" send="-1" recv="-1" chan="0">
      <step s="0" type="nop" srcbuf="i" srcoff="0" dstbuf="o" dstoff="0" cnt="0" depid="1" deps="0" hasdep="0"/>
      <step s="1" type="cpy" srcbuf="i" srcoff="0" dstbuf="o" dstoff="0" cnt="1" depid="-1" deps="-1" hasdep="0"/>
    </tb>
  </gpu>
  <gpu id="1" i_chunks="2" o_chunks="2" s_chunks="0">
    <tb id="0" send="0" recv="0" chan="0">
      <step s="0" type="s" srcbuf="i" srcoff="0" dstbuf="o" dstoff="1" cnt="1" depid="-1" deps="-1" hasdep="0"/>
      <step s="1" type="r" srcbuf="i" srcoff="1" dstbuf="o" dstoff="0" cnt="1" depid="-1" deps="-1" hasdep="0"/>
      <step s="2" type="cpy" srcbuf="i" srcoff="1" dstbuf="o" dstoff="1" cnt="1" depid="-1" deps="-1" hasdep="0"/>
    </tb>
  </gpu>
</algo>"#;
    let s = msccl::import(xml, "swap.xml").unwrap();
    symbolic::check(&s).unwrap();
    // Rank 0's copy sits on its own channel and depends on the receive.
    let copy_ch = s.ranks[0]
        .channels
        .iter()
        .position(|c| c.ops.iter().any(|o| o.kind == OpKind::Copy))
        .unwrap();
    assert_eq!(s.ranks[0].channels[copy_ch].ops[0].deps.len(), 1);
}

#[test]
fn in_place_files_compute_in_the_output() {
    let xml = foreign_ring(3)
        .replace("o_chunks=\"3\"", "o_chunks=\"0\"")
        .replace("buf=\"o\"", "buf=\"i\"");
    let s = msccl::import(&xml, "inplace.xml").unwrap();
    symbolic::check(&s).unwrap();
}

#[test]
fn bad_files_name_the_place() {
    let cases = [
        ("<algo", "not well-formed"),
        ("<graphs/>", "start with <algo>"),
        ("<algo ngpus=\"2\" coll=\"allreduce\"><gpu id=\"5\" i_chunks=\"1\" o_chunks=\"1\"/></algo>", "not below ngpus"),
        ("<algo ngpus=\"1\" coll=\"frobnicate\"/>", "unknown collective"),
        ("<algo ngpus=\"2\" coll=\"allreduce\"><gpu id=\"0\" i_chunks=\"1\" o_chunks=\"1\"/></algo>", "gpu 1 is missing"),
    ];
    for (xml, want) in cases {
        let e = msccl::import(xml, "bad.xml").unwrap_err().to_string();
        assert!(e.contains(want) && e.starts_with("bad.xml"), "{xml}: {e}");
    }
    // A structurally broken schedule (a send nobody receives) fails validation.
    let broken = foreign_ring(3).replacen("type=\"r\"", "type=\"cpy\"", 1);
    assert!(msccl::import(&broken, "b.xml").is_err());
}
