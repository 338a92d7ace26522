//! Where `assignd serve` gets its tokens ([`TokenArgs`]). The admin token:
//! `--admin-token` or `ASSIGND_ADMIN_TOKEN` if given; otherwise DATA_DIR/admin-token, which
//! the first start generates (32 random bytes from the OS, hex) and writes
//! with mode 0600 (temporary file, fsync, rename, fsync of the folder), so
//! a restart on the same data dir keeps the token.
//!
//! It owns that file, and reads the read-only token's (`--read-only-token-file`,
//! [`read_only`]); the checks a token passes are the API's
//! ([`crate::api::auth::check_token`]).

use std::path::{Path, PathBuf};

use crate::api::AdminToken;
use crate::api::auth::check_token;
use crate::durable::{self, Folder};

/// The token file's name in the data dir.
pub const FILE_NAME: &str = "admin-token";

/// Random bytes in a generated token (64 hex characters).
const GENERATED_LEN_BYTES: usize = 32;

/// The environment variable `--admin-token` falls back to.
pub const ADMIN_TOKEN_ENV: &str = "ASSIGND_ADMIN_TOKEN";

/// The environment variable `--read-only-token` falls back to.
const READ_ONLY_TOKEN_ENV: &str = "ASSIGND_READ_ONLY_TOKEN";

/// `assignd serve`'s tokens.
#[derive(Debug, clap::Args)]
pub struct TokenArgs {
    /// The admin token every route but the member heartbeat, /healthz and
    /// /v1/openapi.json requires (`Authorization: Bearer TOKEN`); 16 to
    /// 1024 visible ASCII characters. Neither this nor the variable given:
    /// DIR/admin-token, generated (mode 0600) at first start.
    #[arg(
        long,
        env = ADMIN_TOKEN_ENV,
        value_name = "TOKEN",
        hide_env_values = true
    )]
    pub admin_token: Option<String>,
    /// A read-only token (16 to 1024 visible ASCII characters, not the
    /// admin token): every `GET` of an admin route accepts it (the
    /// console's read-only login), every other method refuses it (403
    /// `read_only_token`). In a cluster every node takes the same one.
    #[arg(
        long,
        env = READ_ONLY_TOKEN_ENV,
        value_name = "TOKEN",
        hide_env_values = true,
        conflicts_with = "read_only_token_file"
    )]
    pub read_only_token: Option<String>,
    /// The read-only token, read from FILE (a trailing newline is not part
    /// of it).
    #[arg(long, value_name = "FILE")]
    pub read_only_token_file: Option<PathBuf>,
}

impl TokenArgs {
    /// The tokens as the API checks them: `admin` if given, else the
    /// admin token's flags or file ([`resolve`]; when it is the data dir's
    /// file, `admin token in PATH` goes to stderr for the operator and
    /// scripts), with the read-only token if one is given ([`read_only`]).
    pub fn load(&mut self, admin: Option<String>, data_dir: &Path) -> Result<AdminToken, String> {
        self.load_keeping(admin, data_dir).map(|(admin, _)| admin)
    }

    /// [`TokenArgs::load`], and the admin token itself: the host's own
    /// requests to its API (the rollout runner's) carry it.
    pub fn load_keeping(
        &mut self,
        admin: Option<String>,
        data_dir: &Path,
    ) -> Result<(AdminToken, String), String> {
        let (token, source) = resolve(admin.or(self.admin_token.take()), data_dir)?;
        match source {
            Source::Given => tracing::info!("admin token from --admin-token or {ADMIN_TOKEN_ENV}"),
            Source::File { path, generated } => {
                tracing::info!(path = %path.display(), generated, "admin token file");
                eprintln!("admin token in {}", path.display());
            }
        }
        let admin = AdminToken::new(&token)?;
        let file = self.read_only_token_file.as_deref();
        let admin = match read_only(self.read_only_token.take(), file)? {
            None => admin,
            Some(read_only) => {
                tracing::info!("read-only token given");
                admin
                    .with_read_only(&read_only)
                    .map_err(|e| format!("the read-only token: {e}"))?
            }
        };
        Ok((admin, token))
    }
}

/// Where the admin token came from.
#[derive(Debug, PartialEq, Eq)]
pub enum Source {
    /// `--admin-token` or `ASSIGND_ADMIN_TOKEN`.
    Given,
    /// DATA_DIR/admin-token, written now or by an earlier start.
    File { path: PathBuf, generated: bool },
}

/// The admin token and where it came from: `given` if any (checked, never
/// written anywhere), else the data dir's token file, created if missing.
/// A given token or a token file that fails the checks is an error, as is
/// a file that cannot be read or written.
pub fn resolve(given: Option<String>, data_dir: &Path) -> Result<(String, Source), String> {
    if let Some(token) = given {
        check_token(&token).map_err(|e| format!("--admin-token (or ASSIGND_ADMIN_TOKEN): {e}"))?;
        return Ok((token, Source::Given));
    }
    let path = data_dir.join(FILE_NAME);
    match std::fs::read_to_string(&path) {
        Ok(text) => {
            // A trailing newline (an editor's, or `echo`'s) is not part of
            // the token.
            let token = text.trim_end_matches(['\n', '\r']).to_owned();
            check_token(&token).map_err(|e| format!("{}: {e}", path.display()))?;
            warn_if_readable_by_others(&path);
            Ok((
                token,
                Source::File {
                    path,
                    generated: false,
                },
            ))
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let token = generate()?;
            write_private(&path, &token)
                .map_err(|e| format!("cannot write the admin token to {}: {e}", path.display()))?;
            Ok((
                token,
                Source::File {
                    path,
                    generated: true,
                },
            ))
        }
        Err(e) => Err(format!(
            "cannot read the admin token from {}: {e}",
            path.display()
        )),
    }
}

/// The read-only token, if one is given: `given` (`--read-only-token` or
/// `ASSIGND_READ_ONLY_TOKEN`), else the content of `file` less a trailing
/// newline; checked. Never generated: without either the host has none.
pub fn read_only(given: Option<String>, file: Option<&Path>) -> Result<Option<String>, String> {
    let token = match (given, file) {
        (Some(token), _) => token,
        (None, Some(path)) => std::fs::read_to_string(path)
            .map_err(|e| {
                format!(
                    "cannot read the read-only token from {}: {e}",
                    path.display()
                )
            })?
            .trim_end_matches(['\n', '\r'])
            .to_owned(),
        (None, None) => return Ok(None),
    };
    check_token(&token).map_err(|e| format!("the read-only token: {e}"))?;
    Ok(Some(token))
}

/// A new token: 32 bytes from the OS's random source, as lowercase hex.
fn generate() -> Result<String, String> {
    let mut bytes = [0u8; GENERATED_LEN_BYTES];
    getrandom::fill(&mut bytes)
        .map_err(|e| format!("cannot read random bytes for the admin token: {e}"))?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

/// Writes `token` and a newline to `path` readable by its owner only, all
/// or nothing ([`durable::write_file`]): a crash leaves either no file or
/// the whole token.
fn write_private(path: &Path, token: &str) -> std::io::Result<()> {
    let temporary = path.with_extension("tmp");
    // A leftover from a crash during an earlier first start.
    match std::fs::remove_file(&temporary) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e),
        _ => {}
    }
    // `create_new`: a file that appears meanwhile is another process's.
    let create_new_private = |temporary: &Path| {
        let mut options = std::fs::OpenOptions::new();
        options.write(true).create_new(true);
        #[cfg(unix)]
        {
            use std::os::unix::fs::OpenOptionsExt;
            options.mode(0o600);
        }
        options.open(temporary)
    };
    let folder = path.parent().unwrap_or(Path::new(""));
    durable::write_file(
        &temporary,
        path,
        &[format!("{token}\n").as_bytes()],
        create_new_private,
        Folder::Path(folder),
    )
    .map(drop)
    .map_err(|e| e.source)
}

/// Warns when the token file may be read by other users.
fn warn_if_readable_by_others(path: &Path) {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        if let Ok(metadata) = std::fs::metadata(path) {
            let mode = metadata.permissions().mode() & 0o777;
            if mode & 0o077 != 0 {
                tracing::warn!(
                    path = %path.display(),
                    mode = format!("{mode:o}"),
                    "the admin token file is readable by other users; chmod 600 it"
                );
            }
        }
    }
    #[cfg(not(unix))]
    let _ = path;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("assignd-token-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn a_token_is_generated_once_private_and_then_reused() {
        let dir = scratch("generate");
        let (token, source) = resolve(None, &dir).unwrap();
        let path = dir.join(FILE_NAME);
        assert_eq!(
            source,
            Source::File {
                path: path.clone(),
                generated: true
            }
        );
        assert_eq!(token.len(), 2 * GENERATED_LEN_BYTES);
        assert!(token.bytes().all(|b| b.is_ascii_hexdigit()));
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            format!("{token}\n")
        );
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&path).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        assert!(!path.with_extension("tmp").exists());
        let (again, source) = resolve(None, &dir).unwrap();
        assert_eq!(again, token);
        assert_eq!(
            source,
            Source::File {
                path,
                generated: false
            }
        );
        let other_dir = scratch("generate-other");
        let (other, _) = resolve(None, &other_dir).unwrap();
        assert_ne!(other, token, "random");
        std::fs::remove_dir_all(&dir).unwrap();
        std::fs::remove_dir_all(&other_dir).unwrap();
    }

    #[test]
    fn a_given_token_wins_and_is_checked() {
        let dir = scratch("given");
        let (token, source) = resolve(Some("0123456789abcdef".into()), &dir).unwrap();
        assert_eq!(
            (token.as_str(), source),
            ("0123456789abcdef", Source::Given)
        );
        assert!(!dir.join(FILE_NAME).exists(), "nothing written");
        let short = resolve(Some("short".into()), &dir).unwrap_err();
        assert!(short.contains("at least 16 bytes"), "{short}");
        assert!(resolve(Some(String::new()), &dir).is_err());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn the_read_only_token_comes_from_the_flag_or_its_file() {
        let dir = scratch("read-only");
        let path = dir.join("read-only-token");
        assert_eq!(read_only(None, None).unwrap(), None);
        std::fs::write(&path, "read-only-token-0123\n").unwrap();
        assert_eq!(
            read_only(None, Some(&path)).unwrap().as_deref(),
            Some("read-only-token-0123")
        );
        assert_eq!(
            read_only(Some("given-read-only-token".into()), Some(&path))
                .unwrap()
                .as_deref(),
            Some("given-read-only-token")
        );
        std::fs::write(&path, "short\n").unwrap();
        let short = read_only(None, Some(&path)).unwrap_err();
        assert!(short.contains("at least 16 bytes"), "{short}");
        let missing = read_only(None, Some(&dir.join("none"))).unwrap_err();
        assert!(missing.contains("cannot read"), "{missing}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_hand_written_file_is_read_and_a_bad_one_refused() {
        let dir = scratch("file");
        let path = dir.join(FILE_NAME);
        std::fs::write(&path, "operator-chosen-token-1\n").unwrap();
        assert_eq!(resolve(None, &dir).unwrap().0, "operator-chosen-token-1");
        std::fs::write(&path, "\n").unwrap();
        let refused = resolve(None, &dir).unwrap_err();
        assert!(refused.contains(FILE_NAME), "{refused}");
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            "\n",
            "not replaced"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
