/// The one error type of PeerIndex: what failed, on which database file, and what to do.
///
/// It carries the operation ("open", "prepare", "step", "migrate 0001-initial", …), the
/// SQL text when a statement was involved, SQLite's extended result code and message,
/// and the database path. `description` is a single line meant for the user; the CLI
/// prints it as is.
package struct IndexError: Error, CustomStringConvertible, Sendable, Equatable {
    /// What kind of failure this is; lets callers (and tests) react without parsing text.
    package enum Kind: Sendable, Equatable {
        /// The file is not an SQLite database at all (random bytes, a text file, …).
        case notADatabase
        /// The file is an SQLite database of another application.
        case foreignDatabase
        /// The database records migrations newer than this binary knows.
        case newerSchema
        /// The file looks like ours but is truncated or corrupt.
        case damaged
        /// The file could not be created, read or opened (permissions, missing directory).
        case cannotOpen
        /// A value read from the database does not have the expected type or form.
        case unexpectedValue
        /// The caller asked for something that does not exist (an unknown chunk index, …).
        case notFound
        /// Any other SQLite failure: constraint, syntax, busy, I/O, ….
        case sqlite
    }

    package var kind: Kind
    /// The operation that failed, e.g. "open", "prepare", "step", "migrate 0001-initial".
    package var operation: String
    /// The database file path ("" for an in-memory database).
    package var path: String
    /// The SQL statement involved, if any.
    package var sql: String?
    /// SQLite's extended result code (e.g. 275 for SQLITE_CONSTRAINT_CHECK), if SQLite reported one.
    package var resultCode: Int32?
    /// SQLite's message (sqlite3_errmsg) or our own explanation.
    package var message: String
    /// What the user can do about it; part of `description`.
    package var hint: String?

    package init(
        kind: Kind, operation: String, path: String, sql: String? = nil,
        resultCode: Int32? = nil, message: String, hint: String? = nil
    ) {
        self.kind = kind
        self.operation = operation
        self.path = path
        self.sql = sql
        self.resultCode = resultCode
        self.message = message
        self.hint = hint
    }

    /// SQLite's primary result code (the low byte of `resultCode`).
    package var primaryResultCode: Int32? { resultCode.map { $0 & 0xFF } }

    /// One line: what is wrong with which file, SQLite's words, the SQL, and what to do.
    package var description: String {
        let file = path.isEmpty ? "the in-memory index" : path
        var line: String
        switch kind {
        case .notADatabase:
            line = "\(file) is not a syncpeer index (\(message))"
        case .foreignDatabase:
            line = "\(file) belongs to another application (\(message))"
        case .newerSchema:
            line = "\(file) was created by a newer syncpeer (\(message))"
        case .damaged:
            line = "\(file) is a damaged syncpeer index (\(message))"
        case .cannotOpen:
            line = "cannot open \(file): \(message)"
        case .unexpectedValue, .notFound, .sqlite:
            line = "\(operation) failed on \(file): \(message)"
        }
        if let code = resultCode {
            line += " [\(Self.codeName(code)), code \(code)]"
        }
        if let sql {
            line += "; SQL: \(Self.oneLine(sql, limit: 200))"
        }
        if let hint {
            line += " — \(hint)"
        }
        return line
    }

    /// Collapses whitespace runs (SQL spans lines) and shortens long text.
    static func oneLine(_ text: String, limit: Int) -> String {
        let words = text.split(whereSeparator: { $0.isWhitespace || $0.isNewline })
        let joined = words.joined(separator: " ")
        return joined.count > limit ? String(joined.prefix(limit)) + "…" : joined
    }

    /// A readable name for SQLite's primary result codes (the numbers are stable ABI).
    static func codeName(_ code: Int32) -> String {
        let names: [Int32: String] = [
            1: "SQLITE_ERROR", 2: "SQLITE_INTERNAL", 3: "SQLITE_PERM", 4: "SQLITE_ABORT",
            5: "SQLITE_BUSY", 6: "SQLITE_LOCKED", 7: "SQLITE_NOMEM", 8: "SQLITE_READONLY",
            9: "SQLITE_INTERRUPT", 10: "SQLITE_IOERR", 11: "SQLITE_CORRUPT", 12: "SQLITE_NOTFOUND",
            13: "SQLITE_FULL", 14: "SQLITE_CANTOPEN", 15: "SQLITE_PROTOCOL", 17: "SQLITE_SCHEMA",
            18: "SQLITE_TOOBIG", 19: "SQLITE_CONSTRAINT", 20: "SQLITE_MISMATCH", 21: "SQLITE_MISUSE",
            23: "SQLITE_AUTH", 25: "SQLITE_RANGE", 26: "SQLITE_NOTADB",
        ]
        let extended: [Int32: String] = [
            275: "SQLITE_CONSTRAINT_CHECK", 787: "SQLITE_CONSTRAINT_FOREIGNKEY",
            1299: "SQLITE_CONSTRAINT_NOTNULL", 1555: "SQLITE_CONSTRAINT_PRIMARYKEY",
            2067: "SQLITE_CONSTRAINT_UNIQUE", 3091: "SQLITE_CONSTRAINT_DATATYPE",
            517: "SQLITE_BUSY_SNAPSHOT", 261: "SQLITE_BUSY_RECOVERY", 267: "SQLITE_CORRUPT_VTAB",
        ]
        return extended[code] ?? names[code & 0xFF] ?? "SQLite code"
    }
}
