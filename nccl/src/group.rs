//! `ncclGroupStart` / `ncclGroupEnd`: calls in between are deferred to the outermost end, per
//! thread. At the end every deferred join runs (one thread per rank, since ranks of one
//! process meet each other), then every communicator's calls run as one batch, again one
//! thread per communicator when there are several (nccl-tests `-g N` drives N ranks from one
//! thread).

use crate::comm::{Comm, Join};
use crate::error::{usage, ApiError};
use crate::exec::run_batch;
use crate::op::Op;
use std::cell::RefCell;
use std::sync::Arc;

#[derive(Default)]
struct Pending {
    depth: u32,
    joins: Vec<Join>,
    ops: Vec<(Arc<Comm>, Op)>,
}

thread_local! {
    static GROUP: RefCell<Pending> = RefCell::new(Pending::default());
}

pub fn start() {
    GROUP.with(|g| g.borrow_mut().depth += 1);
}

pub fn in_group() -> bool {
    GROUP.with(|g| g.borrow().depth > 0)
}

/// Runs `join` now, or at the group's end.
pub fn join(join: Join) -> Result<(), ApiError> {
    if in_group() {
        GROUP.with(|g| g.borrow_mut().joins.push(join));
        Ok(())
    } else {
        join()
    }
}

/// Runs `op` now, or at the group's end.
pub fn submit(comm: Arc<Comm>, op: Op) -> Result<(), ApiError> {
    if in_group() {
        GROUP.with(|g| g.borrow_mut().ops.push((comm, op)));
        Ok(())
    } else {
        run_batch(&comm, &[op])
    }
}

/// Ends one level; at the outermost, runs what was deferred. `simulate`: drop the calls
/// instead (`ncclGroupSimulateEnd`), still joining the ranks.
pub fn end(simulate: bool) -> Result<(), ApiError> {
    let taken = GROUP.with(|g| {
        let mut g = g.borrow_mut();
        if g.depth == 0 {
            return Err(usage("ncclGroupEnd without a matching ncclGroupStart"));
        }
        g.depth -= 1;
        Ok((g.depth == 0).then(|| (std::mem::take(&mut g.joins), std::mem::take(&mut g.ops))))
    })?;
    let Some((joins, ops)) = taken else {
        return Ok(());
    };
    all(joins)?;
    if simulate {
        return Ok(());
    }
    let mut batches: Vec<(Arc<Comm>, Vec<Op>)> = Vec::new();
    for (c, op) in ops {
        match batches.iter_mut().find(|(b, _)| b.handle == c.handle) {
            Some((_, v)) => v.push(op),
            None => batches.push((c, vec![op])),
        }
    }
    let jobs: Vec<Join> = batches
        .into_iter()
        .map(|(c, ops)| Box::new(move || run_batch(&c, &ops)) as Join)
        .collect();
    all(jobs)
}

/// Runs every job, concurrently when there are several; the first error wins.
fn all(jobs: Vec<Join>) -> Result<(), ApiError> {
    if jobs.len() <= 1 {
        return jobs.into_iter().try_for_each(|j| j());
    }
    let results: Vec<Result<(), ApiError>> = std::thread::scope(|s| {
        let hs: Vec<_> = jobs.into_iter().map(|j| s.spawn(j)).collect();
        hs.into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(ApiError::Internal("a rank's thread panicked".into())))
            })
            .collect()
    });
    results.into_iter().collect()
}
