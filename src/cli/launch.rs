//! Starting the ranks of a multi-process run on this host: rank 0 first, on a port the OS
//! chooses; it writes the id it listens at to a file ([`bootstrap::ID_FILE_VAR`]) and the
//! other ranks start with that id. No port is chosen here and bound by another process.

use super::error::CliError;
use runtime::bootstrap::{self, UniqueId};
use std::process::{Child, Command};
use std::time::Duration;

/// Starts `n` ranks, `command(r)` for rank `r`, and returns them in rank order. Rank 0 gets a
/// fresh id at `127.0.0.1:0` in `id_var` and the id file's path; the launcher waits up to
/// `timeout` for the file (failing at once if rank 0 exits first), then starts the others with
/// the id rank 0 wrote in `id_var`. On any failure the ranks already started are stopped.
pub fn start_ranks(
    n: u32,
    id_var: &str,
    timeout: Duration,
    mut command: impl FnMut(u32) -> Command,
) -> Result<Vec<Child>, CliError> {
    let path = bootstrap::fresh_id_file();
    let stop = |kids: &mut Vec<Child>| {
        for k in kids.iter_mut() {
            let _ = k.kill();
            let _ = k.wait();
        }
    };
    let mut root = command(0)
        .env(id_var, UniqueId::new("127.0.0.1:0").to_string())
        .env(bootstrap::ID_FILE_VAR, &path)
        .spawn()
        .map_err(|e| CliError::failure(format!("starting rank 0: {e}")))?;
    let id = bootstrap::wait_for_id_file(&path, timeout, || root.try_wait().ok().flatten());
    let mut kids = vec![root];
    let id = match id {
        Ok(id) => id,
        Err(e) => {
            stop(&mut kids);
            let _ = std::fs::remove_file(&path);
            return Err(CliError::failure(format!("rank 0 did not start: {e}")));
        }
    };
    for r in 1..n {
        match command(r)
            .env(id_var, id.to_string())
            .env_remove(bootstrap::ID_FILE_VAR)
            .spawn()
        {
            Ok(k) => kids.push(k),
            Err(e) => {
                stop(&mut kids);
                return Err(CliError::failure(format!("starting rank {r}: {e}")));
            }
        }
    }
    Ok(kids)
}
