/// Applies the embedded migrations that a database has not recorded yet.
///
/// Each migration runs in its own `BEGIN IMMEDIATE` transaction together with its row in
/// `schema_migrations` (and, for the first one on a new file, the application ID), so a
/// crash leaves the database at a whole migration. The applied set is re-read inside each
/// transaction, so two processes opening a new index at once do not apply anything twice.
struct Migrator {
    let migrations: [Schema.Migration]
    let now: @Sendable () -> Int64

    /// Versions and names recorded in `schema_migrations` (empty when the table does not exist yet).
    static func recorded(in db: Database) throws -> [Int: String] {
        let exists = try db.query(
            "SELECT 1 FROM sqlite_schema WHERE type = 'table' AND name = 'schema_migrations'")
        guard !exists.isEmpty else { return [:] }
        var result: [Int: String] = [:]
        for row in try db.query("SELECT version, name FROM schema_migrations") {
            result[try row.int("version")] = try row.string("name")
        }
        return result
    }

    /// Applies what is missing; returns the versions applied by this call.
    @discardableResult
    func migrate(_ db: Database) throws -> [Int] {
        var applied: [Int] = []
        for migration in migrations {
            let didApply = try db.transaction { () throws -> Bool in
                if try Self.recorded(in: db)[migration.version] != nil { return false }
                if try db.query("PRAGMA application_id").first?[0].int64Value == 0 {
                    // PRAGMA arguments cannot be bound; the value is our own constant.
                    try db.execute("PRAGMA application_id = \(Schema.applicationID)")
                }
                do {
                    try db.execute(migration.sql)
                    if migration.sql.contains("writable_schema") {
                        // It rewrote table definitions in sqlite_schema: a new schema version
                        // makes every connection, this one too, read them again.
                        let version = try db.query("PRAGMA schema_version").first?[0].int64Value ?? 0
                        try db.execute("PRAGMA schema_version = \(version + 1)")
                    }
                    try db.execute(
                        "INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)",
                        [.integer(Int64(migration.version)), .text(migration.name), .integer(now())])
                } catch var error as IndexError {
                    error.operation = "migrate \(migration.name) (\(error.operation))"
                    throw error
                }
                return true
            }
            if didApply { applied.append(migration.version) }
        }
        return applied
    }
}
