//! Join tokens: what an operator hands a machine so that it may join the fleet once (or N
//! times) before the token expires. Stored in `tokens.json` with only the SHA-256 of each
//! secret; the CLI (create, list, delete) and the serving fleet (redeem) share the file under an
//! advisory lock.

use std::path::Path;
use std::time::{Duration, SystemTime};

use factbuoy_protocol::types::{now_rfc3339, rfc3339};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::dir::{FleetDir, lock, write_json_private};

/// A token as `tokens.json` keeps it: never its secret.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Token {
    /// The public half of `ID.SECRET`, by which it is listed and deleted.
    pub id: String,
    /// Lower-case hex SHA-256 of the secret half.
    pub secret_sha256: String,
    /// When it was made, RFC 3339.
    pub created: String,
    /// When it stops being accepted, RFC 3339.
    pub expires: String,
    /// Joins it still allows; `None`: any number until it expires.
    pub uses_left: Option<u32>,
    /// Joins it allowed so far.
    pub used: u32,
}

impl Token {
    /// Whether it expired: it admits no machine any more.
    pub fn expired(&self) -> bool {
        expired(&self.expires)
    }
}

/// Why a token admits no machine. Each message says what to do.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TokenRefusal {
    /// Not `ID.SECRET`.
    #[error("the token is not ID.SECRET as `factbuoy fleet token create` prints it")]
    Malformed,
    /// No token has this id (deleted, or never made here).
    #[error(
        "token {0} is not known to this fleet (deleted, or mistyped); create one with `factbuoy fleet token create`"
    )]
    Unknown(String),
    /// The secret does not match.
    #[error(
        "the secret of token {0} is wrong; copy the whole line `factbuoy fleet token create` printed"
    )]
    WrongSecret(String),
    /// Past its expiry.
    #[error("token {0} expired at {1}; create a new one with `factbuoy fleet token create`")]
    Expired(String, String),
    /// No uses left.
    #[error(
        "token {0} was already used as many times as it allows; create a new one with `factbuoy fleet token create`"
    )]
    UsedUp(String),
}

/// Makes a token valid for `ttl` and `uses` joins (`None`: unlimited); returns `ID.SECRET`, the
/// only time the secret exists outside the machine that joins with it.
pub fn create(dir: &FleetDir, ttl: Duration, uses: Option<u32>) -> std::io::Result<String> {
    let id = hex::encode(rand::random::<[u8; 6]>());
    let secret = hex::encode(rand::random::<[u8; 16]>());
    let token = Token {
        id: id.clone(),
        secret_sha256: hash(&secret),
        created: now_rfc3339(),
        expires: rfc3339(SystemTime::now() + ttl),
        uses_left: uses,
        used: 0,
    };
    with_tokens(dir, |tokens| {
        tokens.push(token);
        Ok(((), true))
    })?;
    Ok(format!("{id}.{secret}"))
}

/// Every token, expired ones included.
pub fn list(dir: &FleetDir) -> std::io::Result<Vec<Token>> {
    with_tokens(dir, |tokens| Ok((tokens.clone(), false)))
}

/// Deletes token `id`; whether there was one.
pub fn delete(dir: &FleetDir, id: &str) -> std::io::Result<bool> {
    with_tokens(dir, |tokens| {
        let before = tokens.len();
        tokens.retain(|t| t.id != id);
        let deleted = tokens.len() != before;
        Ok((deleted, deleted))
    })
}

/// Checks `text` (`ID.SECRET`) and, when it admits a machine, counts one use.
pub fn redeem(dir: &FleetDir, text: &str) -> std::io::Result<Result<(), TokenRefusal>> {
    use_token(dir, text, true)
}

/// Gives back the use [`redeem`] counted for `text`: the join it admitted could not be recorded.
pub fn refund(dir: &FleetDir, text: &str) -> std::io::Result<()> {
    let Some((id, _)) = text.trim().split_once('.') else {
        return Ok(());
    };
    with_tokens(dir, |tokens| {
        let Some(token) = tokens.iter_mut().find(|t| t.id == id && t.used > 0) else {
            return Ok(((), false));
        };
        token.used -= 1;
        if let Some(left) = &mut token.uses_left {
            *left += 1;
        }
        Ok(((), true))
    })
}

/// Checks `text` as [`redeem`] does, without counting a use.
pub fn check(dir: &FleetDir, text: &str) -> std::io::Result<Result<(), TokenRefusal>> {
    use_token(dir, text, false)
}

fn use_token(dir: &FleetDir, text: &str, spend: bool) -> std::io::Result<Result<(), TokenRefusal>> {
    let Some((id, secret)) = text.trim().split_once('.') else {
        return Ok(Err(TokenRefusal::Malformed));
    };
    with_tokens(dir, |tokens| {
        let Some(token) = tokens.iter_mut().find(|t| t.id == id) else {
            return Ok((Err(TokenRefusal::Unknown(printable(id))), false));
        };
        // Compared as digests: the stored value is not the secret.
        if token.secret_sha256 != hash(secret) {
            return Ok((Err(TokenRefusal::WrongSecret(token.id.clone())), false));
        }
        if expired(&token.expires) {
            return Ok((
                Err(TokenRefusal::Expired(
                    token.id.clone(),
                    token.expires.clone(),
                )),
                false,
            ));
        }
        match &mut token.uses_left {
            Some(0) => return Ok((Err(TokenRefusal::UsedUp(token.id.clone())), false)),
            Some(left) if spend => *left -= 1,
            _ => {}
        }
        if spend {
            token.used += 1;
        }
        Ok((Ok(()), spend))
    })
}

/// Whether an RFC 3339 time is in the past (an unreadable one counts as past).
pub fn expired(at: &str) -> bool {
    time::OffsetDateTime::parse(at, &time::format_description::well_known::Rfc3339)
        .map_or(true, |at| at <= time::OffsetDateTime::now_utc())
}

fn hash(secret: &str) -> String {
    hex::encode(Sha256::digest(secret.as_bytes()))
}

/// An id from a request, shortened and without control characters, for a message.
fn printable(id: &str) -> String {
    factbuoy_protocol::text::printable(&id.chars().take(32).collect::<String>()).into_owned()
}

/// Runs `change` on the tokens under the file's lock; writes them back when it says so.
fn with_tokens<T>(
    dir: &FleetDir,
    change: impl FnOnce(&mut Vec<Token>) -> std::io::Result<(T, bool)>,
) -> std::io::Result<T> {
    let _lock = lock(&dir.lock_file())?;
    let path = dir.tokens();
    let mut tokens: Vec<Token> = read(&path)?;
    let (answer, write) = change(&mut tokens)?;
    if write {
        write_json_private(&path, &tokens)?;
    }
    Ok(answer)
}

fn read(path: &Path) -> std::io::Result<Vec<Token>> {
    match std::fs::read(path) {
        Ok(bytes) => serde_json::from_slice(&bytes).map_err(|e| {
            std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!("{}: {e}", path.display()),
            )
        }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Vec::new()),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_admits_as_often_as_it_allows_and_never_stores_its_secret() {
        let temporary = tempfile::tempdir().unwrap();
        let dir = FleetDir::new(temporary.path());
        let once = create(&dir, Duration::from_secs(3600), Some(1)).unwrap();
        let (id, secret) = once.split_once('.').unwrap();
        let stored = std::fs::read_to_string(dir.tokens()).unwrap();
        assert!(!stored.contains(secret), "the secret is stored: {stored}");

        assert_eq!(
            redeem(&dir, &format!("{id}.{}", "0".repeat(32))).unwrap(),
            Err(TokenRefusal::WrongSecret(id.into()))
        );
        assert_eq!(redeem(&dir, &once).unwrap(), Ok(()));
        assert_eq!(
            redeem(&dir, &once).unwrap(),
            Err(TokenRefusal::UsedUp(id.into()))
        );
        // A join that could not be recorded gives its use back.
        refund(&dir, &once).unwrap();
        assert_eq!(redeem(&dir, &once).unwrap(), Ok(()));
        assert_eq!(
            redeem(&dir, &once).unwrap(),
            Err(TokenRefusal::UsedUp(id.into()))
        );
        assert!(matches!(
            redeem(&dir, "nodot").unwrap(),
            Err(TokenRefusal::Malformed)
        ));
        assert!(matches!(
            redeem(&dir, "abc.def").unwrap(),
            Err(TokenRefusal::Unknown(_))
        ));

        let expired = create(&dir, Duration::ZERO, None).unwrap();
        assert!(matches!(
            redeem(&dir, &expired).unwrap(),
            Err(TokenRefusal::Expired(..))
        ));

        let many = create(&dir, Duration::from_secs(3600), None).unwrap();
        for _ in 0..3 {
            assert_eq!(redeem(&dir, &many).unwrap(), Ok(()));
        }
        let many_id = many.split_once('.').unwrap().0;
        assert_eq!(
            list(&dir)
                .unwrap()
                .iter()
                .find(|t| t.id == many_id)
                .unwrap()
                .used,
            3
        );
        assert!(delete(&dir, many_id).unwrap());
        assert!(!delete(&dir, many_id).unwrap());
        assert!(matches!(
            redeem(&dir, &many).unwrap(),
            Err(TokenRefusal::Unknown(_))
        ));
    }
}
