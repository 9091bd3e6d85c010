//! Tests of `exec`: routes and NCCL's buffer layouts.

use super::*;
use crate::abi::NcclType;

fn op(kind: Kind, dtype: NcclType, r: NcclOp) -> Op {
    Op::sample(kind, dtype, r)
}

#[test]
fn data_movement_runs_on_topoplan_as_bytes_for_every_type() {
    for t in NcclType::ALL {
        for k in [
            Kind::AllGather,
            Kind::Broadcast,
            Kind::AllToAll,
            Kind::Gather,
            Kind::Scatter,
            Kind::Send,
            Kind::Recv,
        ] {
            assert_eq!(
                route(&op(k, t, NcclOp::Builtin(ReduceOp::Max))),
                Route::Topoplan {
                    dtype: DataType::U8,
                    op: ReduceOp::Sum,
                    count: 10 * t.size()
                }
            );
        }
    }
}

#[test]
fn reductions_without_an_exact_topoplan_kernel_go_to_nccl() {
    // FP8 reduces on the runtime, but its average is NCCL's PreMulSum, run on device
    // buffers only.
    let fp8 = |t, r| route(&op(Kind::AllReduce, t, NcclOp::Builtin(r)));
    assert_eq!(
        fp8(NcclType::F8E5M2, ReduceOp::Max),
        Route::Topoplan {
            dtype: DataType::F8E5M2,
            op: ReduceOp::Max,
            count: 10
        }
    );
    let avg = fp8(NcclType::F8E4M3, ReduceOp::Avg);
    assert!(
        matches!(avg, Route::Nccl(ref w) if w.contains("float8e4m3 avg")),
        "{avg:?}"
    );
    assert!(matches!(
        route(&op(Kind::Reduce, NcclType::F32, NcclOp::PreMulSum(5))),
        Route::Nccl(_)
    ));
    for (t, d) in [
        (NcclType::U32, DataType::U32),
        (NcclType::U64, DataType::U64),
    ] {
        for r in ReduceOp::ALL {
            assert_eq!(
                route(&op(Kind::ReduceScatter, t, NcclOp::Builtin(r))),
                Route::Topoplan {
                    dtype: d,
                    op: r,
                    count: 10
                }
            );
        }
    }
}

#[test]
fn in_place_layouts_are_nccls() {
    let mut o = op(
        Kind::AllGather,
        NcclType::F32,
        NcclOp::Builtin(ReduceOp::Sum),
    );
    o.recv = 1000;
    o.send = 1000 + 2 * 40;
    assert_eq!(layout(&o, 4, 2, 10, 4), (40, 160, true));
    assert!(!layout(&o, 4, 1, 10, 4).2);
    o.kind = Kind::ReduceScatter;
    o.send = 1000;
    o.recv = 1000 + 3 * 40;
    assert_eq!(layout(&o, 4, 3, 10, 4), (160, 40, true));
    assert!(overlaps(0, 10, 9, 1) && !overlaps(0, 10, 10, 5) && !overlaps(0, 0, 0, 5));
    // Gather and scatter: in place at the root's block, whichever rank asks.
    o.kind = Kind::Gather;
    o.peer = 1;
    o.recv = 1000;
    o.send = 1000 + 40;
    assert_eq!(layout(&o, 4, 1, 10, 4), (40, 160, true));
    o.send = 1000 + 80;
    assert!(!layout(&o, 4, 2, 10, 4).2);
    o.kind = Kind::Scatter;
    o.send = 1000;
    o.recv = 1000 + 40;
    assert_eq!(layout(&o, 4, 1, 10, 4), (160, 40, true));
}
