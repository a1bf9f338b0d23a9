//! Replacing a file atomically: a temporary file in the same directory,
//! written and synced, the file's content checked once more, the temporary
//! file renamed over it, the directory synced. A reader sees the old file
//! or the new one, never a mix; a crash leaves one of them.

use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use super::error::StoreError;
use crate::load::read_regular;
use crate::options::LoadOptions;

/// Writes `bytes` over `target` (the resolved path of the rule file
/// `path`, so a symlink stays a link), keeping the file's permissions,
/// provided the file still holds `expected` when the new one takes its
/// place: an outside edit made meanwhile is a conflict, and is kept.
pub(crate) fn replace_file(
    path: &Path,
    target: &Path,
    bytes: &[u8],
    expected: &[u8],
    options: &LoadOptions,
) -> Result<(), StoreError> {
    let permissions = fs::metadata(target)
        .map_err(|e| StoreError::io("stat", target, e))?
        .permissions();
    let dir = target.parent().unwrap_or(Path::new("/"));
    let temp = temp_path(target, dir);
    if let Err(error) = write_new(&temp, bytes, permissions) {
        // Best effort: the old file is untouched either way.
        let _ = fs::remove_file(&temp);
        return Err(error);
    }
    let swap = Swap {
        path,
        temp: &temp,
        target,
        expected,
        options,
    };
    swap.put_in_place()?;
    // The new file is in place and visible: a failed directory sync only
    // means the rename may not survive a crash. Reporting it as a failure
    // would leave the file changed and the rules not, so it is logged.
    if let Err(error) = sync_dir(dir) {
        tracing::warn!(%error, "sentinel-flow-rules: rule file written, directory not synced");
    }
    Ok(())
}

/// A written temporary file and the file it is to replace.
struct Swap<'a> {
    path: &'a Path,
    temp: &'a Path,
    target: &'a Path,
    expected: &'a [u8],
    options: &'a LoadOptions,
}

impl Swap<'_> {
    /// Checks the content once more, then renames. Where the system can
    /// exchange two names atomically (Linux), the file is exchanged rather
    /// than renamed over, and what it held at that instant is checked
    /// again: an edit renamed into place between the check and the rename
    /// is then put back and told as a conflict instead of being lost.
    /// The temporary file is gone afterwards, whatever happened.
    fn put_in_place(&self) -> Result<(), StoreError> {
        if let Err(error) = self.check(self.target) {
            let _ = fs::remove_file(self.temp);
            return Err(error);
        }
        #[cfg(any(target_os = "linux", target_os = "android"))]
        match exchange(self.temp, self.target) {
            // `temp` now names the file that was in place.
            Ok(()) => return self.after_exchange(),
            // The outside removed the file since the check.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                let _ = fs::remove_file(self.temp);
                return Err(self.conflict("was removed"));
            }
            // Not supported by this file system or kernel: a plain rename.
            Err(e) if unsupported(&e) => {}
            Err(e) => {
                let _ = fs::remove_file(self.temp);
                return Err(StoreError::io("rename", self.temp, e));
            }
        }
        fs::rename(self.temp, self.target).map_err(|e| {
            let _ = fs::remove_file(self.temp);
            StoreError::io("rename", self.temp, e)
        })
    }

    /// After an exchange: `temp` holds what the file held at that
    /// instant. The expected content is dropped; anything else was an
    /// outside edit, exchanged back into place.
    #[cfg(any(target_os = "linux", target_os = "android"))]
    fn after_exchange(&self) -> Result<(), StoreError> {
        let Err(conflict) = self.check(self.temp) else {
            let _ = fs::remove_file(self.temp);
            return Ok(());
        };
        match exchange(self.temp, self.target) {
            Ok(()) => {
                let _ = fs::remove_file(self.temp);
                Err(conflict)
            }
            // The outside edit stays in the temporary file, named in the
            // error, rather than being removed.
            Err(e) => Err(StoreError::io(
                &format!(
                    "put back an outside edit (kept in {}) over",
                    self.temp.display()
                ),
                self.target,
                e,
            )),
        }
    }

    /// A conflict unless the file at `at` holds the expected content.
    fn check(&self, at: &Path) -> Result<(), StoreError> {
        match read_regular(at, self.options) {
            Ok(bytes) if bytes == self.expected => Ok(()),
            Ok(_) => Err(self.conflict("changed on disk")),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Err(self.conflict("was removed")),
            // Replaced by something that cannot be read as a rule file.
            Err(_) => Err(self.conflict("changed on disk")),
        }
    }

    fn conflict(&self, reason: &str) -> StoreError {
        StoreError::Conflict {
            path: self.path.to_path_buf(),
            reason: reason.to_owned(),
        }
    }
}

/// `renameat2(RENAME_EXCHANGE)`: both names stay, their files swap.
#[cfg(any(target_os = "linux", target_os = "android"))]
fn exchange(a: &Path, b: &Path) -> std::io::Result<()> {
    use rustix::fs::{CWD, RenameFlags, renameat_with};
    renameat_with(CWD, a, CWD, b, RenameFlags::EXCHANGE).map_err(Into::into)
}

/// Whether an exchange failed for want of support (an older kernel, a
/// file system without it) rather than for the files.
#[cfg(any(target_os = "linux", target_os = "android"))]
fn unsupported(error: &std::io::Error) -> bool {
    use rustix::io::Errno;
    let code = error.raw_os_error();
    [Errno::INVAL, Errno::NOSYS, Errno::OPNOTSUPP]
        .iter()
        .any(|e| code == Some(e.raw_os_error()))
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
