internal import CSQLite

/// An SQLite connection; owns its `sqlite3*` and closes it in `deinit`.
///
/// Concurrency: `Database` is deliberately **not** `Sendable`. SQLite connections are
/// opened with `SQLITE_OPEN_NOMUTEX`, so one connection must be used by one thread of
/// control at a time, and a transaction spans several calls, which only the owner can
/// keep together. Whoever shares a connection wraps it: `NodeIndex` keeps its `Database`
/// inside a `Mutex`, which makes `NodeIndex` `Sendable` without `@unchecked`.
package final class Database {
    /// How `open(path:options:)` opens and configures the connection.
    package struct Options: Sendable {
        /// Create the file when it does not exist.
        package var createIfMissing: Bool = true
        /// Switch to WAL journal mode and `synchronous=FULL` (this writes to the file).
        package var walJournal: Bool = true
        /// How long a statement waits for another connection's lock before failing with SQLITE_BUSY.
        package var busyTimeoutMilliseconds: Int = 5_000

        package init(createIfMissing: Bool = true, walJournal: Bool = true, busyTimeoutMilliseconds: Int = 5_000) {
            self.createIfMissing = createIfMissing
            self.walJournal = walJournal
            self.busyTimeoutMilliseconds = busyTimeoutMilliseconds
        }
    }

    /// File path of the database, or "" in memory.
    package let path: String
    let handle: OpaquePointer
    /// Prepared statements reused by `cachedStatement(_:)`, keyed by SQL text.
    private var statementCache: [String: Statement] = [:]
    private var savepointCounter = 0
    /// Most statements the cache keeps; syncpeer's fixed SQL needs a few dozen.
    static let statementCacheLimit = 128

    private init(handle: OpaquePointer, path: String) {
        self.handle = handle
        self.path = path
    }

    deinit {
        statementCache.removeAll()
        // close_v2: if a Statement still lives somewhere, the connection closes when it is finalized.
        sqlite3_close_v2(handle)
    }

    /// Opens (and by default creates) the database at `path`, with extended result codes,
    /// `foreign_keys=ON`, a busy timeout and, unless disabled, WAL with `synchronous=FULL`.
    package static func open(path: String, options: Options = Options()) throws(IndexError) -> Database {
        var flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX
        if options.createIfMissing { flags |= SQLITE_OPEN_CREATE }
        return try open(filename: path, flags: flags, displayPath: path, options: options)
    }

    /// A private in-memory database (for tests and tools), configured like `open(path:)`.
    package static func inMemory() throws(IndexError) -> Database {
        try open(filename: ":memory:", flags: SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX,
                 displayPath: "", options: Options(walJournal: false))
    }

    /// SQLite's memory statistics, off before the first connection opens: counting each
    /// allocation under a process-wide mutex was ~2 % of each node's CPU in D (50,000 files),
    /// and no statistic we read needs them (`pageCacheBytes` counts the cache's pages).
    static let memoryStatisticsOff: Bool = csqlite_disable_memory_statistics() == SQLITE_OK

    private static func open(filename: String, flags: Int32, displayPath: String, options: Options) throws(IndexError) -> Database {
        _ = memoryStatisticsOff
        var raw: OpaquePointer?
        let rc = sqlite3_open_v2(filename, &raw, flags, nil)
        guard rc == SQLITE_OK, let raw else {
            let message = raw.map { Self.message($0, rc) } ?? String(cString: sqlite3_errstr(rc))
            if let raw { sqlite3_close_v2(raw) }
            throw IndexError(kind: rc == SQLITE_CANTOPEN ? .cannotOpen : kind(for: rc), operation: "open",
                             path: displayPath, resultCode: rc, message: message,
                             hint: rc == SQLITE_CANTOPEN ? "check that the directory exists and is writable" : nil)
        }
        let db = Database(handle: raw, path: displayPath)
        sqlite3_extended_result_codes(raw, 1)
        sqlite3_busy_timeout(raw, Int32(clamping: options.busyTimeoutMilliseconds))
        // foreign_keys is per connection and writes nothing to the file.
        try db.execute("PRAGMA foreign_keys = ON")
        if options.walJournal {
            try db.useWALJournal()
        }
        return db
    }

    /// Switches to WAL (readers never block the writer) with `synchronous=FULL`, and gives
    /// the connection a 32 MiB page cache.
    ///
    /// FULL: a commit is durable when it returns (the WAL is fsynced), because the node acts
    /// on what it commits: it tells peers it accepted a share, holds a version, deleted a
    /// file. With NORMAL (durable only at checkpoints) a power cut undid an accepted share
    /// while the sharer still counted on it: the offer came again and the folder was made a
    /// second time, beside the first (power-loss tests, seed 1). Commits are batched, so this
    /// is one WAL fsync per batch.
    /// WAL is recorded in the file, so this is the first call that writes to it.
    package func useWALJournal() throws(IndexError) {
        let mode = try query("PRAGMA journal_mode = WAL").first?[0].stringValue
        guard mode?.lowercased() == "wal" || path.isEmpty else {
            throw IndexError(kind: .sqlite, operation: "set journal mode", path: path, sql: "PRAGMA journal_mode = WAL",
                             message: "SQLite kept journal mode \(mode ?? "unknown") instead of WAL")
        }
        try execute("PRAGMA synchronous = FULL")
        // A page cache of up to 32 MiB (SQLite's default is ~2 MiB): the file and chunk
        // indexes of a large folder are inserted in hash order, one random page each, and a
        // small cache re-reads and re-writes those pages for every batch. Indexing 1,000,000
        // files: 158.6 s and a peak RSS of 71 MiB, against 284.6 s and 32 MiB (make bench,
        // index_1m, 2 Dec). Filled only as pages are used.
        try execute("PRAGMA cache_size = -32768")
    }

    /// Frees the page cache's pages that no statement is using. The cache keeps what it
    /// filled (up to the 32 MiB above) for as long as the connection lives: after a large
    /// pull or scan, that much heap stays in use in an idle daemon.
    package func releaseMemory() {
        sqlite3_db_release_memory(handle)
    }

    /// Bytes the connection's page cache holds now (SQLITE_DBSTATUS_CACHE_USED).
    package var pageCacheBytes: Int {
        var current: Int32 = 0
        var highest: Int32 = 0
        sqlite3_db_status(handle, SQLITE_DBSTATUS_CACHE_USED, &current, &highest, 0)
        return Int(current)
    }

    // MARK: Statements

    /// Prepares one statement. Trailing text after the first statement is an error.
    package func prepare(_ sql: String) throws(IndexError) -> Statement {
        var raw: OpaquePointer?
        var tailOffset = 0
        let rc = sql.withCString { start -> Int32 in
            var tail: UnsafePointer<CChar>?
            let rc = sqlite3_prepare_v2(handle, start, -1, &raw, &tail)
            if let tail { tailOffset = start.distance(to: tail) }
            return rc
        }
        guard rc == SQLITE_OK else {
            throw IndexError(kind: Self.kind(for: rc), operation: "prepare", path: path, sql: sql,
                             resultCode: rc, message: Self.message(handle, rc))
        }
        guard let raw else {
            throw IndexError(kind: .sqlite, operation: "prepare", path: path, sql: sql,
                             message: "the SQL text contains no statement")
        }
        let statement = Statement(handle: raw, connection: handle, path: path)
        let rest = sql.utf8.dropFirst(tailOffset)
        if rest.contains(where: { !$0.isASCIIWhitespaceOrSemicolon }) {
            throw IndexError(kind: .sqlite, operation: "prepare", path: path, sql: sql,
                             message: "more than one statement; use execute(_:) for scripts")
        }
        return statement
    }

    /// A prepared statement for `sql`, kept for reuse: reset, with bindings cleared.
    /// Meant for fixed SQL text run often (per chunk, per file); do not hold it across
    /// calls that might fetch the same SQL again. `query` and `execute(_:_:)` use it.
    package func cachedStatement(_ sql: String) throws(IndexError) -> Statement {
        if let statement = statementCache[sql] {
            statement.reset()
            statement.clearBindings()
            return statement
        }
        let statement = try prepare(sql)
        // Generated SQL would grow the cache without bound: start over past a fixed size.
        if statementCache.count >= Self.statementCacheLimit { statementCache.removeAll() }
        statementCache[sql] = statement
        return statement
    }

    /// Runs a script: every statement in `sql`, in order (rows are discarded). An error
    /// names the statement that failed, not the whole script.
    package func execute(_ sql: String) throws(IndexError) {
        let utf8 = Array(sql.utf8CString)
        var offset = 0
        while offset < utf8.count - 1 {
            var raw: OpaquePointer?
            var consumed = 0
            let rc = utf8.withUnsafeBufferPointer { buffer -> Int32 in
                let start = buffer.baseAddress! + offset
                var tail: UnsafePointer<CChar>?
                let rc = sqlite3_prepare_v2(handle, start, -1, &raw, &tail)
                consumed = tail.map { start.distance(to: $0) } ?? (buffer.count - 1 - offset)
                return rc
            }
            guard rc == SQLITE_OK else {
                let remaining = String(decoding: utf8[offset..<(utf8.count - 1)].map { UInt8(bitPattern: $0) }, as: UTF8.self)
                throw IndexError(kind: Self.kind(for: rc), operation: "prepare", path: path,
                                 sql: remaining.droppingLeadingComments(), resultCode: rc, message: Self.message(handle, rc))
            }
            offset += max(consumed, 1)
            guard let raw else { continue } // only whitespace or comments
            try Statement(handle: raw, connection: handle, path: path).execute()
        }
    }

    /// Runs one statement with positional bindings, discarding rows.
    package func execute(_ sql: String, _ bindings: [SQLValue]) throws(IndexError) {
        let statement = try cachedStatement(sql)
        try statement.bind(bindings)
        try statement.execute()
    }

    /// Runs one statement with positional bindings and returns all rows.
    package func query(_ sql: String, _ bindings: [SQLValue] = []) throws(IndexError) -> [Row] {
        let statement = try cachedStatement(sql)
        try statement.bind(bindings)
        return try statement.rows()
    }

    /// Rows changed by the last INSERT, UPDATE or DELETE.
    package var changes: Int { Int(sqlite3_changes64(handle)) }

    /// Row ID of the last successful INSERT on this connection.
    /// Settable (`sqlite3_set_last_insert_rowid`): set to 0 before a statement, it tells
    /// whether that statement inserted a row (SQLite chooses 0 only for a table whose largest
    /// row ID is -1: none of ours, whose IDs SQLite chooses from 1 up).
    package var lastInsertRowID: Int64 {
        get { sqlite3_last_insert_rowid(handle) }
        set { sqlite3_set_last_insert_rowid(handle, newValue) }
    }

    /// Whether a transaction is open (the connection is not in autocommit mode).
    package var isInTransaction: Bool { sqlite3_get_autocommit(handle) == 0 }

    // MARK: Transactions

    /// Runs `body` in a transaction: `BEGIN IMMEDIATE` (take the write lock up front, so
    /// the busy timeout applies at the start and not at a deadlock-prone upgrade), then
    /// `COMMIT`, or `ROLLBACK` when `body` throws. Nested calls use a savepoint, so an
    /// inner failure rolls back only the inner part.
    package func transaction<T>(_ body: () throws -> T) throws -> T {
        if isInTransaction {
            savepointCounter += 1
            let name = "syncpeer_sp\(savepointCounter)"
            defer { savepointCounter -= 1 }
            try execute("SAVEPOINT \(name)")
            do {
                let result = try body()
                try execute("RELEASE \(name)")
                return result
            } catch {
                try? execute("ROLLBACK TO \(name)")
                try? execute("RELEASE \(name)")
                throw error
            }
        }
        try execute("BEGIN IMMEDIATE")
        do {
            let result = try body()
            try execute("COMMIT")
            return result
        } catch {
            if isInTransaction { try? execute("ROLLBACK") }
            throw error
        }
    }

    // MARK: Error helpers

    static func message(_ connection: OpaquePointer, _ rc: Int32) -> String {
        let text = sqlite3_errmsg(connection).map { String(cString: $0) } ?? ""
        return text.isEmpty || text == "not an error" ? String(cString: sqlite3_errstr(rc)) : text
    }

    static func kind(for rc: Int32) -> IndexError.Kind {
        switch rc & 0xFF {
        case SQLITE_NOTADB: .notADatabase
        case SQLITE_CORRUPT: .damaged
        case SQLITE_CANTOPEN: .cannotOpen
        default: .sqlite
        }
    }
}

extension UInt8 {
    fileprivate var isASCIIWhitespaceOrSemicolon: Bool {
        self == 0x20 || self == 0x09 || self == 0x0A || self == 0x0D || self == 0x3B || self == 0
    }
}

extension String {
    /// The text from the first statement on: leading whitespace and `--` / `/* */` comments removed.
    fileprivate func droppingLeadingComments() -> String {
        var rest = Substring(self)
        while true {
            rest = rest.drop(while: { $0.isWhitespace })
            if rest.hasPrefix("--") {
                rest = rest.drop(while: { $0 != "\n" })
            } else if rest.hasPrefix("/*"), let end = rest.firstRange(of: "*/") {
                rest = rest[end.upperBound...]
            } else {
                return String(rest)
            }
        }
    }
}
