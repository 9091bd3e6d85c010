//! Embedding the runtime: one process per rank, torchrun-style.
//!
//! ```text
//! cargo build --release -p runtime --example allreduce
//! torchrun --nproc-per-node 4 --no-python target/release/examples/allreduce
//! # or by hand, one shell per rank:
//! RANK=0 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=29511 target/release/examples/allreduce
//! RANK=1 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=29511 target/release/examples/allreduce
//! ```

use runtime::{Communicator, ReduceOp};

fn main() {
    if let Err(e) = run() {
        eprintln!("error: {e}");
        std::process::exit(1);
    }
}

fn run() -> Result<(), runtime::CommError> {
    let mut comm = Communicator::from_env()?;
    let (rank, n) = (comm.rank(), comm.nranks());
    // Every rank contributes rank + 1 in every element; the sum is n(n+1)/2 everywhere.
    let mut grad = vec![(rank + 1) as f32; 1 << 20];
    comm.all_reduce_in_place(&mut grad, ReduceOp::Sum)?;
    let want = (n * (n + 1) / 2) as f32;
    let wrong = grad.iter().filter(|&&x| x != want).count();
    // Gather every rank's count of wrong elements on every rank.
    let mut all = vec![0i64; n as usize];
    comm.all_gather(&[wrong as i64], &mut all)?;
    if rank == 0 {
        println!(
            "all-reduce of {} floats on {n} ranks over {}: wrong elements per rank {all:?}",
            grad.len(),
            comm.transport_name()
        );
    }
    if all.iter().any(|&w| w > 0) {
        std::process::exit(1);
    }
    Ok(())
}
