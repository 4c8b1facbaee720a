//! Where the SQL of the two engines differs. Everything else is generated once from the
//! declarations and runs unchanged on both (placeholders are written `?` and numbered for
//! PostgreSQL when a statement is prepared, see [`numbered`]). What each engine's search index
//! answers is chosen in `search_index.rs`.

use crate::value::Value;

/// One tier of a search's results (see [`crate::store::relevance`]), as conditions, each with
/// its parameters, that select the same rows: `walk` keeps the engine from reading the tier
/// out of a search index, so that it walks an index in id order and tests each row (against
/// sets of the search index computed once per statement, never a look-up per row); `set` lets
/// it read the tier's rows from a search index and sort them; `planned`, where the engine
/// keeps statistics of the index that would serve it, leaves the choice to its planner.
pub struct Tier {
    pub walk: (String, Vec<Value>),
    pub set: (String, Vec<Value>),
    pub planned: Option<(String, Vec<Value>)>,
}

/// The SQL dialect of an engine.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dialect {
    Sqlite,
    Postgres,
}

impl Dialect {
    /// `expr` is one of the ids bound as one [`crate::store::Value::Ids`] parameter.
    pub fn in_ids(self, expr: &str) -> String {
        match self {
            Dialect::Sqlite => format!("{expr} IN (SELECT value FROM json_each(?))"),
            Dialect::Postgres => format!("{expr} = ANY(?)"),
        }
    }

    /// `expr` is none of the ids bound as one parameter.
    pub fn not_in_ids(self, expr: &str) -> String {
        match self {
            Dialect::Sqlite => format!("{expr} NOT IN (SELECT value FROM json_each(?))"),
            Dialect::Postgres => format!("{expr} <> ALL(?)"),
        }
    }

    /// A table `alias(value, key)` of the ids bound as one parameter, `key` counting from 0.
    pub fn ids_table(self, alias: &str) -> String {
        match self {
            Dialect::Sqlite => format!("(SELECT key, value FROM json_each(?)) AS {alias}"),
            Dialect::Postgres => {
                format!("(SELECT ord - 1 AS key, value FROM unnest(CAST(? AS text[])) WITH ORDINALITY AS u(value, ord)) AS {alias}")
            }
        }
    }

    /// A statement that locks row `id = ?` of `table` until the transaction ends; `None` where
    /// one writer at a time is all there is (SQLite).
    pub fn lock_row(self, table: &str) -> Option<String> {
        match self {
            Dialect::Sqlite => None,
            Dialect::Postgres => Some(format!("SELECT id FROM {table} WHERE id = ? FOR UPDATE")),
        }
    }

    /// A setting for a connection about to read a whole database once, if the engine needs one:
    /// SQLite maps the file into memory for fast point reads, which in a full scan would make
    /// the process as large as the file.
    pub fn whole_scan(self) -> Option<&'static str> {
        match self {
            Dialect::Sqlite => Some("PRAGMA mmap_size = 0"),
            // A command's read of everything (export, backup, copy) has no request's time limit.
            Dialect::Postgres => Some("SET statement_timeout = 0"),
        }
    }

    /// The text `hay` contains the text `needle` (both SQL expressions).
    pub fn contains(self, hay: &str, needle: &str) -> String {
        match self {
            Dialect::Sqlite => format!("instr({hay}, {needle}) > 0"),
            Dialect::Postgres => format!("strpos({hay}, {needle}) > 0"),
        }
    }

    /// A setting for the rest of a search's read transaction, if the engine needs one:
    /// PostgreSQL would rather read a whole table than count a common word's matches from the
    /// GIN index, which its own measurements here contradict; and with that plan's made-up
    /// cost it would compile every statement of the search to machine code first (JIT, tens
    /// of milliseconds), so that is off too. Each statement is planned for its values: after a
    /// few runs of a prepared statement PostgreSQL may keep one plan for any values, which read
    /// the first page of a common word as it reads a deep page (3 ms became 51 ms).
    pub fn search_setting(self) -> Option<&'static str> {
        match self {
            Dialect::Sqlite => None,
            Dialect::Postgres => Some(
                "SELECT set_config('enable_seqscan', 'off', true), set_config('jit', 'off', true), \
                 set_config('plan_cache_mode', 'force_custom_plan', true)",
            ),
        }
    }

    /// The `ORDER BY` of a tier read with [`Tier::set`]: PostgreSQL is given an expression of
    /// the id's order that the id index cannot serve, or it may still walk that index (its
    /// estimate of a word it has no statistics for is far too high).
    pub fn set_order(self) -> &'static str {
        match self {
            Dialect::Sqlite => "id",
            Dialect::Postgres => "id || ''",
        }
    }

    /// `a` differs from `b`, nulls compared as values.
    pub fn distinct(self, a: &str, b: &str) -> String {
        match self {
            Dialect::Sqlite => format!("{a} IS NOT {b}"),
            Dialect::Postgres => format!("{a} IS DISTINCT FROM {b}"),
        }
    }
}

/// How each engine writes the JSON of a revision's `changes` (see `store/history.rs`): the same
/// text on both, as their history triggers write it.
impl Dialect {
    /// The functions that build a JSON object and a JSON array from SQL values.
    pub fn json_builders(self) -> (&'static str, &'static str) {
        match self {
            Dialect::Sqlite => ("json_object", "json_array"),
            Dialect::Postgres => ("json_build_object", "json_build_array"),
        }
    }

    /// The column `expr` of `kind` as its JSON value: a boolean as `true`/`false` (SQLite
    /// stores 0/1), a time as the API writes it (PostgreSQL stores `timestamptz`).
    pub fn json_value(self, expr: &str, kind: crate::resources::Kind) -> String {
        use crate::resources::Kind;
        match (self, kind) {
            (Dialect::Sqlite, Kind::Bool) => {
                format!("CASE {expr} WHEN 0 THEN json('false') WHEN 1 THEN json('true') END")
            }
            (Dialect::Postgres, Kind::Timestamp) => format!("coursed_time({expr})"),
            _ => expr.to_owned(),
        }
    }

    /// The time now, as the API writes times, when a revision is recorded.
    pub fn revision_time(self) -> &'static str {
        match self {
            Dialect::Sqlite => "strftime('%Y-%m-%dT%H:%M:%fZ', 'now')",
            Dialect::Postgres => "date_trunc('milliseconds', clock_timestamp())",
        }
    }

    /// How revisions are pruned (see `history::prune`): the statement that deletes the
    /// revisions of the keys bound as one parameter, the one that drops their places in the
    /// feed (where the feed is a table of its own), and the one that raises the floor.
    pub fn pruning(self) -> (&'static str, Option<&'static str>, &'static str) {
        match self {
            Dialect::Sqlite => (
                "DELETE FROM revisions WHERE seq IN (SELECT CAST(value AS INTEGER) FROM json_each(?))",
                None,
                "UPDATE history_state SET floor = ? WHERE id = 1 AND floor < ?",
            ),
            Dialect::Postgres => (
                "DELETE FROM revisions WHERE id = ANY(CAST(CAST(? AS text[]) AS bigint[]))",
                Some("DELETE FROM revision_feed WHERE revision = ANY(CAST(CAST(? AS text[]) AS bigint[]))"),
                "UPDATE revision_head SET floor = ? WHERE id = 1 AND floor < ?",
            ),
        }
    }

    /// Whether a revision gets its place in the feed (`seq`) when it is inserted (SQLite: one
    /// transaction writes at a time) rather than after commit (PostgreSQL: `sequencer.rs`).
    /// The statement that turns the history triggers off (`on` false) or on again for the rest
    /// of this transaction: a follower writes the revisions it applies itself. (SQLite's flag
    /// is rolled back with a write that fails; PostgreSQL's lasts until the transaction ends.)
    pub fn history_recording(self, on: bool) -> &'static str {
        match (self, on) {
            (Dialect::Sqlite, true) => "UPDATE history_context SET recording = 1 WHERE id = 1",
            (Dialect::Sqlite, false) => "UPDATE history_context SET recording = 0 WHERE id = 1",
            (Dialect::Postgres, true) => "SELECT set_config('coursed.recording', 'on', true)",
            (Dialect::Postgres, false) => "SELECT set_config('coursed.recording', 'off', true)",
        }
    }

    pub fn places_revisions_on_insert(self) -> bool {
        self == Dialect::Sqlite
    }

    /// A placeholder for a JSON text stored in a `json` column (`revisions.changes`).
    pub fn json_param(self) -> &'static str {
        match self {
            Dialect::Sqlite => "?",
            Dialect::Postgres => "CAST(CAST(? AS text) AS json)",
        }
    }

    /// The statements that forget every revision, the floor of the feed raised to its head: a
    /// reader's cursor from before is told its revisions are gone (`history::forget_all`).
    pub fn forgetting_history(self) -> &'static [&'static str] {
        match self {
            Dialect::Sqlite => &[
                "UPDATE history_state SET floor = max(floor, (SELECT coalesce(max(seq), 0) FROM revisions)) WHERE id = 1",
                "DELETE FROM revisions",
            ],
            Dialect::Postgres => &[
                "UPDATE revision_head SET floor = head WHERE id = 1",
                "DELETE FROM revision_feed",
                "DELETE FROM revision_pending",
                "DELETE FROM revisions",
            ],
        }
    }

    /// A statement answering 1 when this transaction may prune the history and 0 when another
    /// (a replica's) is pruning, so that replicas take turns instead of deleting the same rows
    /// at once: a transaction-scoped advisory lock ("crsp"). `None` where writers take turns
    /// anyway (SQLite).
    pub fn prune_turn(self) -> Option<&'static str> {
        match self {
            Dialect::Sqlite => None,
            Dialect::Postgres => Some("SELECT CASE WHEN pg_try_advisory_xact_lock(1668445040) THEN 1 ELSE 0 END"),
        }
    }

    /// `insert` (an `INSERT INTO revisions ...`) made to note its rows for the feed, where the
    /// engine gives revisions their place after commit (PostgreSQL: `sequencer.rs`).
    pub fn noted_for_feed(self, insert: &str) -> String {
        match self {
            Dialect::Sqlite => insert.to_owned(),
            Dialect::Postgres => {
                format!("WITH r AS ({insert} RETURNING id) INSERT INTO revision_pending (revision) SELECT id FROM r")
            }
        }
    }
}

/// `sql` with its `?` placeholders numbered `$1`, `$2`, ... (PostgreSQL's form). `?` inside
/// quoted strings and identifiers is left alone.
pub fn numbered(sql: &str) -> String {
    let mut out = String::with_capacity(sql.len() + 16);
    let (mut n, mut quote) = (0, None::<char>);
    for ch in sql.chars() {
        match (quote, ch) {
            (None, '\'' | '"') => {
                quote = Some(ch);
                out.push(ch);
            }
            (Some(q), c) if c == q => {
                quote = None;
                out.push(ch);
            }
            (None, '?') => {
                n += 1;
                out.push('$');
                out.push_str(&n.to_string());
            }
            _ => out.push(ch),
        }
    }
    out
}

/// `INSERT INTO table (columns) VALUES (?, ...), ...` for `rows` rows: the same in both
/// dialects.
pub fn insert_rows(table: &str, columns: &[&str], rows: usize) -> String {
    let row = format!("({})", vec!["?"; columns.len()].join(", "));
    format!("INSERT INTO {table} ({}) VALUES {}", columns.join(", "), vec![row; rows].join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placeholders_are_numbered_outside_quotes() {
        assert_eq!(
            numbered("SELECT a FROM t WHERE b = ? AND c IN (?, '?', \"?\") LIMIT ?"),
            "SELECT a FROM t WHERE b = $1 AND c IN ($2, '?', \"?\") LIMIT $3"
        );
    }
}
