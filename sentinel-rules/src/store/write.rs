//! Replacing a file atomically: a temporary file in the same directory,
//! written and synced, renamed over the file, the directory synced. A
//! reader sees the old file or the new one, never a mix; a crash leaves
//! one of them.

use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use super::error::StoreError;

/// Writes `bytes` to `path` (symlinks followed: the file they lead to is
/// replaced, so a link stays a link), keeping the file's permissions.
pub(crate) fn replace_file(path: &Path, bytes: &[u8]) -> Result<(), StoreError> {
    let target = fs::canonicalize(path).map_err(|e| StoreError::io("resolve", path, e))?;
    let permissions = fs::metadata(&target)
        .map_err(|e| StoreError::io("stat", &target, e))?
        .permissions();
    let dir = target.parent().unwrap_or(Path::new("/"));
    let temp = temp_path(&target, dir);
    let written = write_new(&temp, bytes, permissions)
        .and_then(|()| fs::rename(&temp, &target).map_err(|e| StoreError::io("rename", &temp, e)));
    if let Err(error) = written {
        // Best effort: the old file is untouched either way.
        let _ = fs::remove_file(&temp);
        return Err(error);
    }
    // The new file is in place and visible: a failed directory sync only
    // means the rename may not survive a crash. Reporting it as a failure
    // would leave the file changed and the rules not, so it is logged.
    if let Err(error) = sync_dir(dir) {
        tracing::warn!(%error, "sentinel-rules: rule file written, directory not synced");
    }
    Ok(())
}

/// A name no other writer in this process uses, hidden from `ls` and from
/// globs like `*.yaml`.
fn temp_path(target: &Path, dir: &Path) -> PathBuf {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let name = target
        .file_name()
        .map_or_else(|| "rules".into(), |n| n.to_string_lossy());
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    dir.join(format!(".{name}.{}.{n}.tmp", std::process::id()))
}

fn write_new(temp: &Path, bytes: &[u8], permissions: fs::Permissions) -> Result<(), StoreError> {
    let mut file = OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(temp)
        .map_err(|e| StoreError::io("create", temp, e))?;
    file.set_permissions(permissions)
        .map_err(|e| StoreError::io("set the permissions of", temp, e))?;
    file.write_all(bytes)
        .map_err(|e| StoreError::io("write", temp, e))?;
    file.sync_all().map_err(|e| StoreError::io("sync", temp, e))
}

/// Makes the rename durable: on unix a directory entry is only on disk
/// once the directory is synced.
#[cfg(unix)]
fn sync_dir(dir: &Path) -> Result<(), StoreError> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| StoreError::io("sync the directory", dir, e))
}

#[cfg(not(unix))]
fn sync_dir(_dir: &Path) -> Result<(), StoreError> {
    Ok(())
}
