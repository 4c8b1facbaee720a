//! `coursed token create|list|revoke`: the tokens kept in a database, managed from the command
//! line while servers run on it (they read the table at every request).

use std::time::Duration;

use super::store::{self, Listed};
use super::{secret, Scope, BOOTSTRAP, CONFIGURED};
use crate::store::{display_name, DbError, Tx};

/// A token just created: the token itself (shown once, never kept) and its row.
pub struct Created {
    pub token: String,
    pub listed: Listed,
}

/// Creates the token `name` in `database`, which must exist: a token made in a new file beside
/// the server's database would be refused by the server.
/// Makes a token in `database`, a SQLite file that must exist unless `create_database`.
pub fn create(
    database: &str,
    name: &str,
    scope: Scope,
    expires: Option<Duration>,
    create_database: bool,
) -> Result<Created, String> {
    check_name(name)?;
    if expires.is_some_and(|d| d.as_millis() == 0) {
        return Err("--expires must be longer than 0, e.g. 90d or 12h".into());
    }
    let minted = secret::mint()?;
    let token = minted.token.clone();
    let now = crate::time::now_ms();
    let expires_at = expires.map(|d| now.saturating_add(i64::try_from(d.as_millis()).unwrap_or(i64::MAX)));
    let owned = name.to_owned();
    let taken = crate::store::on_command_tx(database, "tokens", true, create_database, move |tx| {
        if store::name_taken(tx, &owned)? {
            return Ok(true);
        }
        match store::insert(tx, &owned, scope, &minted, now, expires_at) {
            // Made by another process at the same moment (PostgreSQL).
            Err(DbError::Unique { .. }) => Ok(true),
            other => other.map(|()| false),
        }
    })?;
    if taken {
        return Err(format!("a token named {name:?} exists already; choose another name or revoke it first"));
    }
    Ok(Created {
        token,
        listed: Listed { name: name.to_owned(), scope, created_at: now, expires_at, last_used_at: None },
    })
}

/// Every token of `database`, by name.
pub fn list(database: &str) -> Result<Vec<Listed>, String> {
    on_database(database, |tx| store::list(tx))
}

/// Revokes (deletes) the token `name`: every server refuses it from its next request on.
pub fn revoke(database: &str, name: &str) -> Result<(), String> {
    let owned = name.to_owned();
    if on_database(database, move |tx| store::revoke(tx, &owned))? {
        Ok(())
    } else {
        Err(format!("there is no token named {name:?} in {} (coursed token list shows them)", display_name(database)))
    }
}

/// The tokens as a table: name, scope, creation, expiry, last use (times in UTC).
pub fn table(tokens: &[Listed], now: i64) -> String {
    let time = |t: Option<i64>, none: &str| t.map_or_else(|| none.to_owned(), crate::time::format_ms);
    let mut rows = vec![["NAME".to_owned(), "SCOPE".into(), "CREATED".into(), "EXPIRES".into(), "LAST USED".into()]];
    for t in tokens {
        let mut expires = time(t.expires_at, "never");
        if t.expires_at.is_some_and(|at| at <= now) {
            expires.push_str(" (expired)");
        }
        let created = crate::time::format_ms(t.created_at);
        rows.push([t.name.clone(), t.scope.as_str().into(), created, expires, time(t.last_used_at, "never")]);
    }
    let widths: Vec<usize> = (0..5).map(|c| rows.iter().map(|r| r[c].chars().count()).max().unwrap_or(0)).collect();
    let mut out = String::new();
    for r in &rows {
        let cells: Vec<String> = r.iter().zip(&widths).map(|(cell, w)| format!("{cell:<w$}")).collect();
        out.push_str(cells.join("  ").trim_end());
        out.push('\n');
    }
    out
}

/// A token name: 1 to 64 ASCII letters, digits, `.`, `_`, `-` or `@`, other than the names of the
/// configured tokens (so that a log line names one token).
pub fn check_name(name: &str) -> Result<(), String> {
    let allowed = |c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-' | '@');
    if name.is_empty() || name.len() > 64 || !name.chars().all(allowed) {
        return Err(format!("{name:?} is not a token name: use 1 to 64 ASCII letters, digits, '.', '_', '-' or '@'"));
    }
    if name == CONFIGURED {
        return Err(format!("{name:?} names the configured tokens in logs; choose another name"));
    }
    if name == BOOTSTRAP {
        return Err(format!("{name:?} names the token generated at the first start in logs; choose another name"));
    }
    Ok(())
}

/// Runs `f` as one write on `database`, which must exist.
fn on_database<T: Send + 'static>(
    database: &str,
    f: impl FnMut(&mut dyn Tx) -> Result<T, DbError> + Send + 'static,
) -> Result<T, String> {
    crate::store::on_command_tx(database, "tokens", true, false, f)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_short_plain_and_not_reserved() {
        for good in ["teacher", "display-3", "app.v2", "ann@school", &"x".repeat(64)] {
            assert_eq!(check_name(good), Ok(()), "{good}");
        }
        for bad in ["", "has space", "tab\t", "élève", &"x".repeat(65), "config", "bootstrap", "a/b"] {
            assert!(check_name(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn the_table_shows_every_column_and_marks_expired_tokens() {
        let t = |name: &str, expires_at| Listed {
            name: name.into(),
            scope: Scope::Read,
            created_at: 0,
            expires_at,
            last_used_at: None,
        };
        let out = table(&[t("display", Some(1_000)), t("app", None)], 2_000);
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(
            lines[0].split_whitespace().collect::<Vec<_>>(),
            ["NAME", "SCOPE", "CREATED", "EXPIRES", "LAST", "USED"]
        );
        assert!(
            lines[1].starts_with("display  read   1970-01-01T00:00:00.000Z  1970-01-01T00:00:01.000Z (expired)  never"),
            "{out}"
        );
        assert!(lines[2].contains("never") && !lines[2].contains("expired"), "{out}");
    }
}
