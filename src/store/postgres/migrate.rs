//! The PostgreSQL schema, versioned in `coursed_schema` and migrated under an advisory lock so
//! that replicas starting at the same moment migrate once.

use postgres::Client;

/// The schema migrations, in order; `coursed_schema` records those applied. Append only.
const MIGRATIONS: &[&str] = &[include_str!("../../../schema.postgres.sql")];
/// The advisory lock taken while migrating ("crsd").
const LOCK: i64 = 0x6372_7364;

/// Brings the schema up to date; refuses databases that are newer or hold another
/// application's tables.
pub fn migrate(client: &mut Client) -> Result<(), String> {
    let sql = |e: postgres::Error| e.as_db_error().map_or_else(|| e.to_string(), |d| d.message().to_owned());
    let mut tx = client.transaction().map_err(sql)?;
    // Held until the transaction ends; another replica waits here, then finds the work done.
    tx.execute("SELECT pg_advisory_xact_lock($1)", &[&LOCK]).map_err(sql)?;
    let ours: bool = tx.query_one("SELECT to_regclass('coursed_schema') IS NOT NULL", &[]).map_err(sql)?.get(0);
    let version: i32 = if ours {
        tx.query_one("SELECT coalesce(max(version), 0) FROM coursed_schema", &[]).map_err(sql)?.get(0)
    } else {
        let tables: i64 = tx
            .query_one("SELECT count(*) FROM pg_tables WHERE schemaname = current_schema()", &[])
            .map_err(sql)?
            .get(0);
        if tables > 0 {
            return Err(format!(
                "its schema {} holds {tables} tables but is not a coursed database; use an empty database",
                current_schema(&mut tx)
            ));
        }
        0
    };
    let known = MIGRATIONS.len() as i32;
    if version > known {
        return Err(format!(
            "its schema version is {version}, newer than this coursed knows ({known}); use a newer coursed"
        ));
    }
    for (i, step) in MIGRATIONS.iter().enumerate().skip(version as usize) {
        tx.batch_execute(step).map_err(|e| format!("migration {} failed: {}", i + 1, sql(e)))?;
        tx.execute("INSERT INTO coursed_schema (version) VALUES ($1)", &[&(i as i32 + 1)]).map_err(sql)?;
    }
    tx.commit().map_err(sql)?;
    if version < known {
        log::info!("database schema migrated from version {version} to {known}");
    }
    Ok(())
}

fn current_schema(tx: &mut postgres::Transaction<'_>) -> String {
    tx.query_one("SELECT current_schema()", &[]).map(|r| r.get::<_, String>(0)).unwrap_or_else(|_| "public".into())
}
