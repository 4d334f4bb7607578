internal import CSQLite

/// A prepared SQLite statement; owns its `sqlite3_stmt` and finalizes it in `deinit`.
///
/// Use: bind parameters (1-based index or `:name`), then `step()` until it returns false,
/// reading columns (0-based) while it returns true. `reset()` makes it reusable with the
/// same bindings; `clearBindings()` sets every parameter back to NULL.
///
/// Not `Sendable`: a statement belongs to its `Database` and is used on the same thread
/// of control (see `Database`).
package final class Statement {
    /// The SQL text as prepared (one statement).
    package let sql: String
    let handle: OpaquePointer
    /// The connection handle, for error messages. A connection closed with
    /// `sqlite3_close_v2` stays alive until its last statement is finalized, so this
    /// pointer is valid for the statement's whole life even if the `Database` goes first.
    private let connection: OpaquePointer
    private let path: String

    init(handle: OpaquePointer, connection: OpaquePointer, path: String) {
        self.handle = handle
        self.connection = connection
        self.path = path
        self.sql = sqlite3_sql(handle).map { String(cString: $0) } ?? ""
    }

    deinit {
        sqlite3_finalize(handle)
    }

    // MARK: Binding

    /// Number of parameters in the SQL.
    package var parameterCount: Int { Int(sqlite3_bind_parameter_count(handle)) }

    /// Binds `value` to parameter `index` (1-based, as in SQLite).
    package func bind(_ value: SQLValue, at index: Int) throws(IndexError) {
        let i = Int32(clamping: index)
        let rc: Int32
        switch value {
        case .integer(let v):
            rc = sqlite3_bind_int64(handle, i, v)
        case .real(let v):
            rc = sqlite3_bind_double(handle, i, v)
        case .text(let v):
            var text = v
            rc = text.withUTF8 { bytes in
                // A nil pointer would bind NULL: give SQLite a real pointer for "".
                guard let base = bytes.baseAddress, !bytes.isEmpty else {
                    return sqlite3_bind_text(handle, i, "", 0, sqliteTransient)
                }
                return base.withMemoryRebound(to: CChar.self, capacity: bytes.count) {
                    sqlite3_bind_text64(handle, i, $0, sqlite3_uint64(bytes.count), sqliteTransient, UInt8(SQLITE_UTF8))
                }
            }
        case .blob(let v):
            // sqlite3_bind_blob with a nil pointer binds NULL; an empty blob needs zeroblob(0).
            if v.isEmpty {
                rc = sqlite3_bind_zeroblob(handle, i, 0)
            } else {
                rc = v.withUnsafeBytes { sqlite3_bind_blob64(handle, i, $0.baseAddress, sqlite3_uint64($0.count), sqliteTransient) }
            }
        case .null:
            rc = sqlite3_bind_null(handle, i)
        }
        try check(rc, "bind parameter \(index)")
    }

    /// Binds `value` to the parameter called `name`, including its prefix (":id", "@id", "$id").
    package func bind(_ value: SQLValue, named name: String) throws(IndexError) {
        let index = sqlite3_bind_parameter_index(handle, name)
        guard index > 0 else {
            throw error(kind: .sqlite, "bind", resultCode: SQLITE_RANGE, "no parameter named \(name) in the statement")
        }
        try bind(value, at: Int(index))
    }

    /// Binds `values` to parameters 1, 2, 3, …; the count must match the SQL.
    package func bind(_ values: [SQLValue]) throws(IndexError) {
        guard values.count == parameterCount else {
            throw error(kind: .sqlite, "bind", resultCode: SQLITE_RANGE,
                        "\(values.count) values given for \(parameterCount) parameters")
        }
        for (offset, value) in values.enumerated() {
            try bind(value, at: offset + 1)
        }
    }

    /// Binds named values; each key includes its prefix (":id").
    package func bind(_ values: [String: SQLValue]) throws(IndexError) {
        for (name, value) in values {
            try bind(value, named: name)
        }
    }

    /// Sets all parameters back to NULL.
    package func clearBindings() {
        sqlite3_clear_bindings(handle)
    }

    // MARK: Stepping

    /// Runs the statement to its next row. Returns true when a row is available, false when done.
    @discardableResult
    package func step() throws(IndexError) -> Bool {
        let rc = sqlite3_step(handle)
        switch rc {
        case SQLITE_ROW: return true
        case SQLITE_DONE: return false
        default:
            // Reset so the statement can be reused; the error is reported from the step's code.
            sqlite3_reset(handle)
            throw error(kind: Database.kind(for: rc), "step", resultCode: rc, Database.message(connection, rc))
        }
    }

    /// Makes the statement ready to run again; bindings are kept.
    package func reset() {
        sqlite3_reset(handle)
    }

    /// Steps to the end, ignoring rows; then resets. For INSERT / UPDATE / DELETE.
    package func execute() throws(IndexError) {
        defer { reset() }
        while try step() {}
    }

    /// Steps to the end and returns every row; then resets.
    package func rows() throws(IndexError) -> [Row] {
        defer { reset() }
        var result: [Row] = []
        let names = columnNames
        while try step() {
            result.append(Row(columns: names, values: (0..<columnCount).map(value(at:)), path: path))
        }
        return result
    }

    // MARK: Columns (valid while `step()` last returned true)

    package var columnCount: Int { Int(sqlite3_column_count(handle)) }

    package var columnNames: [String] {
        (0..<columnCount).map { i in sqlite3_column_name(handle, Int32(i)).map { String(cString: $0) } ?? "" }
    }

    /// The value of column `index` (0-based) in the current row, in its stored type.
    package func value(at index: Int) -> SQLValue {
        let i = Int32(clamping: index)
        switch sqlite3_column_type(handle, i) {
        case SQLITE_INTEGER: return .integer(sqlite3_column_int64(handle, i))
        case SQLITE_FLOAT: return .real(sqlite3_column_double(handle, i))
        case SQLITE_TEXT:
            // Ask for the pointer first, then the length (the order SQLite documents).
            guard let text = sqlite3_column_text(handle, i) else { return .text("") }
            let count = Int(sqlite3_column_bytes(handle, i))
            return .text(String(decoding: UnsafeBufferPointer(start: text, count: count), as: UTF8.self))
        case SQLITE_BLOB:
            // A zero-length blob comes back as a nil pointer.
            guard let bytes = sqlite3_column_blob(handle, i) else { return .blob([]) }
            let count = Int(sqlite3_column_bytes(handle, i))
            return .blob(Array(UnsafeRawBufferPointer(start: bytes, count: count)))
        default:
            return .null
        }
    }

    package func isNull(at index: Int) -> Bool { sqlite3_column_type(handle, Int32(clamping: index)) == SQLITE_NULL }
    package func int64(at index: Int) -> Int64? { value(at: index).int64Value }
    package func double(at index: Int) -> Double? { value(at: index).doubleValue }
    package func string(at index: Int) -> String? { value(at: index).stringValue }
    package func blob(at index: Int) -> [UInt8]? { value(at: index).blobValue }

    /// The current row as a `Row`.
    package func row() -> Row {
        Row(columns: columnNames, values: (0..<columnCount).map(value(at:)), path: path)
    }

    // MARK: Errors

    /// (`operation` is built only on failure: an interpolated string per bind was 0.5 % of
    /// alice's CPU in D.)
    private func check(_ rc: Int32, _ operation: @autoclosure () -> String) throws(IndexError) {
        guard rc == SQLITE_OK else {
            throw error(kind: Database.kind(for: rc), operation(), resultCode: rc, Database.message(connection, rc))
        }
    }

    private func error(kind: IndexError.Kind, _ operation: String, resultCode: Int32?, _ message: String) -> IndexError {
        IndexError(kind: kind, operation: operation, path: path, sql: sql, resultCode: resultCode, message: message)
    }
}

/// SQLITE_TRANSIENT (the macro does not import): SQLite copies bound text and blobs
/// before the bind call returns, so Swift buffers may go away right after.
let sqliteTransient = unsafeBitCast(-1, to: sqlite3_destructor_type.self)
