internal import Glibc
internal import Synchronization

/// The node's index database: settings, peers, transfers (and, with folder sync, files).
///
/// One `NodeIndex` per node home, shared by the engine's tasks. It is `Sendable`: the
/// connection lives in a `Mutex`, so calls are serialized and each call that writes runs
/// in its own transaction. Calls block while SQLite works (and up to the 5 s busy timeout
/// if another process holds the write lock); they are short, so no actor hop is needed.
///
/// Every method throws `IndexError`.
package final class NodeIndex: Sendable {
    /// Database file path ("" in memory).
    package let path: String
    /// Current time in unix milliseconds; injectable so tests never depend on the wall clock.
    let clock: @Sendable () -> Int64
    private let database: Mutex<Database>

    private init(database: sending Database, clock: @escaping @Sendable () -> Int64) {
        self.path = database.path
        self.clock = clock
        self.database = Mutex(database)
    }

    /// The system clock in unix milliseconds.
    package static let systemClock: @Sendable () -> Int64 = {
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        return Int64(now.tv_sec) * 1000 + Int64(now.tv_nsec) / 1_000_000
    }

    /// Opens the index at `path`, creating and initialising it when there is no file.
    ///
    /// Refuses, without modifying the file: anything that is not an SQLite database
    /// (`.notADatabase`), an empty (0-byte), truncated or corrupt file (`.damaged`), another
    /// application's database (`.foreignDatabase`), and an index written by a newer syncpeer
    /// (`.newerSchema`). Then switches to WAL with `synchronous=FULL`, turns on foreign
    /// keys, and applies the migrations this database has not recorded yet. A new file is
    /// created with mode 0600, complete (see `createNew`).
    package static func open(at path: String, clock: @escaping @Sendable () -> Int64 = systemClock) throws(IndexError) -> NodeIndex {
        if try IndexFile.inspect(path: path) == .missing {
            try createNew(at: path, clock: clock)
        }
        let db = try Database.open(path: path, options: Database.Options(createIfMissing: false, walJournal: false))
        try validate(db)
        try db.useWALJournal()
        try migrate(db, clock: clock)
        return NodeIndex(database: db, clock: clock)
    }

    /// A private in-memory index with the full schema, for tests of code that uses one.
    package static func inMemory(clock: @escaping @Sendable () -> Int64 = systemClock) throws(IndexError) -> NodeIndex {
        let db = try Database.inMemory()
        try migrate(db, clock: clock)
        return NodeIndex(database: db, clock: clock)
    }

    /// The highest migration version recorded in this database.
    package func schemaVersion() throws(IndexError) -> Int {
        try read { db in try Migrator.recorded(in: db).keys.max() ?? 0 }
    }

    // MARK: Settings

    /// The value of setting `key`, or nil when it was never set.
    package func setting(_ key: String) throws(IndexError) -> String? {
        try read { db in try db.query("SELECT value FROM settings WHERE key = ?", [.text(key)]).first?.string("value") }
    }

    /// Sets `key` to `value`; nil removes the setting.
    package func setSetting(_ key: String, _ value: String?) throws(IndexError) {
        try write { db in
            if let value {
                try db.execute("INSERT INTO settings (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                               [.text(key), .text(value)])
            } else {
                try db.execute("DELETE FROM settings WHERE key = ?", [.text(key)])
            }
        }
    }

    // MARK: Access to the connection

    /// Runs `body` with the connection, outside any explicit transaction (for reads).
    func read<T: Sendable>(_ body: (Database) throws -> T) throws(IndexError) -> T {
        try withDatabase(body)
    }

    /// Runs `body` in one transaction: all of it is committed, or none.
    func write<T: Sendable>(_ body: (Database) throws -> T) throws(IndexError) -> T {
        try withDatabase { db in try db.transaction { try body(db) } }
    }

    private func withDatabase<T: Sendable>(_ body: (Database) throws -> T) throws(IndexError) -> T {
        do {
            return try database.withLock { db in try body(db) }
        } catch let error as IndexError {
            throw error
        } catch {
            throw IndexError(kind: .unexpectedValue, operation: "index access", path: path, message: "\(error)")
        }
    }
}

// MARK: Opening checks

extension NodeIndex {
    /// Decides whether `db` is a new file, our index, or something to refuse. Reads only.
    static func validate(_ db: Database) throws(IndexError) {
        let path = db.path
        do {
            let applicationID = try db.query("PRAGMA application_id").first?[0].int64Value ?? 0
            if applicationID != Int64(Schema.applicationID) {
                if applicationID != 0 {
                    throw IndexError(
                        kind: .foreignDatabase, operation: "open", path: path,
                        message: "application_id is \(hex(applicationID)), a syncpeer index has \(hex(Int64(Schema.applicationID)))",
                        hint: "it was left untouched; choose another file or home (SYNCPEER_HOME)")
                }
                let objects = try db.query(
                    "SELECT name FROM sqlite_schema WHERE name NOT LIKE 'sqlite_%' ORDER BY name LIMIT 4")
                if !objects.isEmpty {
                    let names = try objects.map { try $0.string("name") }.joined(separator: ", ")
                    throw IndexError(
                        kind: .foreignDatabase, operation: "open", path: path,
                        message: "an SQLite database with tables \(names) and no syncpeer application_id",
                        hint: "it was left untouched; choose another file or home (SYNCPEER_HOME)")
                }
                return // a new, empty database: the migrations will initialise it
            }
            let recorded = try Migrator.recorded(in: db)
            let known = Dictionary(uniqueKeysWithValues: Schema.migrations.map { ($0.version, $0.name) })
            if let newest = recorded.keys.max(), newest > Schema.latestVersion {
                throw IndexError(
                    kind: .newerSchema, operation: "open", path: path,
                    message: "schema version \(newest), \(recorded[newest] ?? "unnamed"); this syncpeer knows up to \(Schema.latestVersion)",
                    hint: "upgrade syncpeer; the index was left untouched")
            }
            for (version, name) in recorded.sorted(by: { $0.key < $1.key }) where known[version] != name {
                throw IndexError(
                    kind: .damaged, operation: "open", path: path,
                    message: "migration \(version) is recorded as \(name), but this syncpeer calls it \(known[version] ?? "nothing")",
                    hint: "the index was left untouched; it may come from a development build")
            }
        } catch let error as IndexError {
            switch error.kind {
            case .notADatabase:
                var refined = IndexFile.notADatabase(path)
                refined.resultCode = error.resultCode
                throw refined
            case .damaged where error.resultCode != nil:
                var refined = IndexFile.damaged(path, error.message)
                refined.resultCode = error.resultCode
                throw refined
            default:
                throw error
            }
        } catch {
            throw IndexError(kind: .sqlite, operation: "open", path: path, message: "\(error)")
        }
    }

    /// Makes a new index at `path`: built in a temporary file beside it (rollback journal,
    /// every migration applied, fsynced) and linked into place only then. So `path` never
    /// exists empty or half made, and an empty index file is always damage (a failed copy,
    /// a disk that lost it), refused like any other. Another process that created it first
    /// wins; its index is used.
    static func createNew(at path: String, clock: @escaping @Sendable () -> Int64) throws(IndexError) {
        let temporary = path + ".new-\(getpid())"
        IndexFile.remove(temporary)   // left by a crashed run that had our process ID
        defer { IndexFile.remove(temporary) }
        try IndexFile.create(path: temporary)
        do {
            let db = try Database.open(path: temporary, options: Database.Options(createIfMissing: false, walJournal: false))
            try migrate(db, clock: clock)
        }
        try IndexFile.publish(temporary, as: path)
    }

    static func migrate(_ db: Database, clock: @escaping @Sendable () -> Int64) throws(IndexError) {
        do {
            try Migrator(migrations: Schema.migrations, now: clock).migrate(db)
        } catch let error as IndexError {
            throw error
        } catch {
            throw IndexError(kind: .sqlite, operation: "migrate", path: db.path, message: "\(error)")
        }
    }

    private static func hex(_ value: Int64) -> String {
        "0x" + String(UInt32(truncatingIfNeeded: value), radix: 16, uppercase: true)
    }
}
