/// One result row, copied out of SQLite so it outlives the statement.
///
/// Typed accessors throw an `IndexError` of kind `.unexpectedValue` naming the column
/// when the stored value has another type, instead of silently converting as
/// `sqlite3_column_*` would.
package struct Row: Sendable, Equatable {
    /// Column names, in result order.
    package let columns: [String]
    /// Values, in result order.
    package let values: [SQLValue]
    /// Database path, for error messages.
    let path: String

    init(columns: [String], values: [SQLValue], path: String) {
        self.columns = columns
        self.values = values
        self.path = path
    }

    package var count: Int { values.count }

    /// The value of column `index` (0-based).
    package subscript(index: Int) -> SQLValue { values[index] }

    /// The value of the first column named `name`, or nil if there is no such column.
    package subscript(name: String) -> SQLValue? {
        columns.firstIndex(of: name).map { values[$0] }
    }

    package func int64(_ column: String) throws(IndexError) -> Int64 {
        try typed(column, "INTEGER") { $0.int64Value }
    }
    package func optionalInt64(_ column: String) throws(IndexError) -> Int64? {
        try optional(column, "INTEGER") { $0.int64Value }
    }
    package func int(_ column: String) throws(IndexError) -> Int { Int(try int64(column)) }
    package func bool(_ column: String) throws(IndexError) -> Bool {
        switch try int64(column) {
        case 0: false
        case 1: true
        default: throw mismatch(column, "0 or 1")
        }
    }
    package func double(_ column: String) throws(IndexError) -> Double {
        try typed(column, "REAL") { $0.doubleValue }
    }
    package func string(_ column: String) throws(IndexError) -> String {
        try typed(column, "TEXT") { $0.stringValue }
    }
    package func optionalString(_ column: String) throws(IndexError) -> String? {
        try optional(column, "TEXT") { $0.stringValue }
    }
    package func blob(_ column: String) throws(IndexError) -> [UInt8] {
        try typed(column, "BLOB") { $0.blobValue }
    }
    package func optionalBlob(_ column: String) throws(IndexError) -> [UInt8]? {
        try optional(column, "BLOB") { $0.blobValue }
    }

    private func value(_ column: String) throws(IndexError) -> SQLValue {
        guard let value = self[column] else {
            throw IndexError(
                kind: .unexpectedValue, operation: "read column", path: path,
                message: "no column named \(column) in the result (columns: \(columns.joined(separator: ", ")))")
        }
        return value
    }

    private func typed<T>(_ column: String, _ type: String, _ get: (SQLValue) -> T?) throws(IndexError) -> T {
        let value = try value(column)
        guard let result = get(value) else { throw mismatch(column, type) }
        return result
    }

    private func optional<T>(_ column: String, _ type: String, _ get: (SQLValue) -> T?) throws(IndexError) -> T? {
        let value = try value(column)
        if value.isNull { return nil }
        guard let result = get(value) else { throw mismatch(column, type + " or NULL") }
        return result
    }

    private func mismatch(_ column: String, _ expected: String) -> IndexError {
        IndexError(
            kind: .unexpectedValue, operation: "read column", path: path,
            message: "column \(column) holds \(self[column].map(String.init(describing:)) ?? "nothing"), expected \(expected)")
    }
}
