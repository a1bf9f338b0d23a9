//! The advisory lock every store takes before it reads, checks and
//! replaces a rule file: an exclusive `flock` on a file beside it, so that
//! two writers through a store, in one process or in two, never both
//! replace the same content.

use std::fs::File;
use std::path::{Path, PathBuf};

use super::error::StoreError;

/// How long a writer waits for another one to finish before it gives up:
/// a replace holds the lock for a read, a render and one synced write.
#[cfg(unix)]
const WAIT_STEP: std::time::Duration = std::time::Duration::from_millis(5);
/// Steps of [`WAIT_STEP`]: 5 s in all.
#[cfg(unix)]
const WAIT_STEPS: u32 = 1_000;

/// Held while a store checks and replaces the file; released on drop
/// (and by the system if the process dies).
#[derive(Debug)]
pub(crate) struct WriteLock {
    _file: Option<File>,
}

/// The lock file of the rule file `target` (its resolved path):
/// `.rules.yaml.lock` in the same directory. It is created once and left
/// in place: removing a lock file would let two writers lock two files.
pub(crate) fn lock_path(target: &Path) -> PathBuf {
    let name = target
        .file_name()
        .map_or_else(|| "rules".into(), |n| n.to_string_lossy());
    let dir = target.parent().unwrap_or(Path::new("/"));
    dir.join(format!(".{name}.lock"))
}

/// Takes the write lock of `target`, waiting up to 5 s for another writer.
#[cfg(unix)]
pub(crate) fn exclusive(target: &Path) -> Result<WriteLock, StoreError> {
    use rustix::fs::{FlockOperation, flock};
    use rustix::io::Errno;

    let path = lock_path(target);
    // Read access is enough to lock: a writer without write permission on
    // a lock file another user created still takes part.
    let file = match File::open(&path) {
        Ok(file) => file,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(|e| StoreError::io("create", &path, e))?,
        Err(e) => return Err(StoreError::io("open", &path, e)),
    };
    let mut steps = 0;
    loop {
        match flock(&file, FlockOperation::NonBlockingLockExclusive) {
            Ok(()) => return Ok(WriteLock { _file: Some(file) }),
            Err(Errno::INTR) => {}
            Err(Errno::WOULDBLOCK) if steps < WAIT_STEPS => {
                steps += 1;
                std::thread::sleep(WAIT_STEP);
            }
            Err(Errno::WOULDBLOCK) => {
                let held = std::io::Error::new(
                    std::io::ErrorKind::TimedOut,
                    "another writer has held it for 5 s",
                );
                return Err(StoreError::io("lock", &path, held));
            }
            Err(e) => return Err(StoreError::io("lock", &path, e.into())),
        }
    }
}

/// Without `flock`, writers of one process still replace one at a time
/// (the store's process-wide lock) and the content is checked again just
/// before the rename; two processes are not kept apart.
#[cfg(not(unix))]
pub(crate) fn exclusive(_target: &Path) -> Result<WriteLock, StoreError> {
    Ok(WriteLock { _file: None })
}
