//! `ncclGroupStart` / `ncclGroupEnd`: calls in between are deferred to the outermost end, per
//! thread. At the end every deferred join runs (one thread per rank, since ranks of one
//! process meet each other), then every communicator's calls run as one batch, again one
//! thread per communicator when there are several (nccl-tests `-g N` drives N ranks from one
//! thread).
//!
//! A group is all or nothing, as NCCL's is: a call that fails inside it is remembered, and the
//! outermost end then runs nothing, cancels the deferred inits (their handles become NULL and
//! invalid) and returns that call's code with its message.

use crate::comm::{lock, Comm, Join};
use crate::error::{usage, ApiError};
use crate::exec::run_batch;
use crate::op::Op;
use std::cell::RefCell;
use std::sync::Arc;

/// Undoes a deferred init or split whose group failed, with the reason.
pub type Cancel = Box<dyn FnOnce(&ApiError) + Send>;

struct Deferred {
    join: Join,
    cancel: Cancel,
}

#[derive(Default)]
struct Pending {
    depth: u32,
    joins: Vec<Deferred>,
    ops: Vec<(Arc<Comm>, Op)>,
    /// The first call that failed inside the group.
    error: Option<(&'static str, ApiError)>,
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

/// Remembers that `call` failed inside a group (the first failure wins).
pub fn record_error(call: &'static str, e: &ApiError) {
    GROUP.with(|g| {
        let mut g = g.borrow_mut();
        if g.depth > 0 && g.error.is_none() {
            g.error = Some((call, e.clone()));
        }
    })
}

/// Runs `join` now, or at the group's end; `cancel` undoes it if the group fails first.
pub fn join(join: Join, cancel: Cancel) -> Result<(), ApiError> {
    if in_group() {
        GROUP.with(|g| g.borrow_mut().joins.push(Deferred { join, cancel }));
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

type Taken = (
    Vec<Deferred>,
    Vec<(Arc<Comm>, Op)>,
    Option<(&'static str, ApiError)>,
);

/// Ends one level; at the outermost, runs what was deferred. `simulate`: drop the calls
/// instead (`ncclGroupSimulateEnd`), still joining the ranks. `refused`: the end itself was
/// refused (a bad `ncclSimInfo_t`), which fails the group like a failed call inside it.
pub fn end(simulate: bool, refused: Option<ApiError>) -> Result<(), ApiError> {
    let taken: Option<Taken> = GROUP.with(|g| {
        let mut g = g.borrow_mut();
        if g.depth == 0 {
            return Err(usage("ncclGroupEnd without a matching ncclGroupStart"));
        }
        g.depth -= 1;
        Ok((g.depth == 0).then(|| {
            (
                std::mem::take(&mut g.joins),
                std::mem::take(&mut g.ops),
                g.error.take(),
            )
        }))
    })?;
    let Some((joins, ops, failed)) = taken else {
        return refused.map_or(Ok(()), Err);
    };
    if let Some(e) = refused.or_else(|| {
        failed.map(|(call, e)| {
            e.reworded(format!(
                "{call} inside the group failed, so nothing in the group ran: {e}"
            ))
        })
    }) {
        for d in joins {
            (d.cancel)(&e);
        }
        for (c, _) in &ops {
            c.last_error.set(&format!("ncclGroupEnd: {e}"));
        }
        return Err(e);
    }
    all(joins.into_iter().map(|d| d.join).collect())?;
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
        .map(|(c, ops)| {
            Box::new(move || {
                // The communicator's own last error names what failed, not only the process's.
                run_batch(&c, &ops).inspect_err(|e| c.last_error.set(&format!("ncclGroupEnd: {e}")))
            }) as Join
        })
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

/// Cancels a deferred init: the handle leaves the registry and anyone waiting on it hears why.
pub fn cancel_comm(c: &Comm, e: &ApiError) {
    let _ = crate::comm::remove(c.handle);
    let _ = c.finish_join(Err(e.clone()));
    drop(lock(&c.cpu).take());
}
