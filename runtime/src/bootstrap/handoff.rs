//! How a launcher learns rank 0's id when rank 0 chose its own port: rank 0 binds (port 0),
//! writes the id it listens at to a file, and the launcher, waiting for that file, starts the
//! other ranks with the id. No port is chosen by one process and bound by another.

use super::{BootstrapError, UniqueId};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitStatus;
use std::time::{Duration, Instant};

/// The file rank 0 writes its unique id to (text form, at the port it bound) as soon as it
/// listens, for the launcher that started it (read by [`crate::EnvRank::from_lookup`]; the
/// launchers of `topoplan run --mode procs` and `bench --procs` set it).
pub const ID_FILE_VAR: &str = params::UNIQUE_ID_FILE.name;

/// A path for a new id file, in the temporary directory, unique to this process and call.
pub fn fresh_id_file() -> PathBuf {
    let tag = super::hex(&super::id::random_secret()[..6]);
    std::env::temp_dir().join(format!("topoplan-id-{}-{tag}", std::process::id()))
}

/// Writes `id`'s text to `path` atomically (a temporary file in the same directory, then a
/// rename), readable by its owner only: it holds the job's secret. A reader sees the whole id
/// or no file.
pub fn write_id_file(path: &Path, id: &UniqueId) -> Result<(), BootstrapError> {
    let doing = || format!("writing the unique id to {}", path.display());
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(format!(".{}.tmp", std::process::id()));
    let tmp = PathBuf::from(tmp);
    let write = || -> std::io::Result<()> {
        use std::os::unix::fs::OpenOptionsExt;
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(&tmp)?;
        f.write_all(id.to_string().as_bytes())?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)
    };
    write().map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        super::io(doing(), e)
    })
}

/// The launcher's side: waits until rank 0 has written its id to `path`, then reads it and
/// removes the file. `root_exited` says whether rank 0 has exited (e.g. `Child::try_wait`);
/// then the wait fails at once with [`BootstrapError::RootExited`], and after `timeout` with
/// [`BootstrapError::Timeout`].
pub fn wait_for_id_file(
    path: &Path,
    timeout: Duration,
    mut root_exited: impl FnMut() -> Option<ExitStatus>,
) -> Result<UniqueId, BootstrapError> {
    let start = Instant::now();
    loop {
        // Read before looking at rank 0: it may write the id and fail right after.
        match std::fs::read_to_string(path) {
            Ok(text) => {
                let _ = std::fs::remove_file(path);
                return text.trim().parse();
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(super::io(format!("reading {}", path.display()), e)),
        }
        if let Some(st) = root_exited() {
            return Err(BootstrapError::RootExited {
                status: st.to_string(),
                path: path.display().to_string(),
            });
        }
        if start.elapsed() >= timeout {
            return Err(BootstrapError::Timeout {
                doing: format!(
                    "waiting for rank 0 to write its unique id to {}",
                    path.display()
                ),
                waited: timeout,
            });
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}
