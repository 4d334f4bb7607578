import PeerIndex
import Testing

/// Bindings and columns of every SQLite type, by index and by name.
@Suite struct StatementTests {
    struct Case: Sendable, CustomTestStringConvertible {
        let value: SQLValue
        let sqlType: String
        var testDescription: String { "\(value) as \(sqlType)" }
    }

    static let cases: [Case] = [
        Case(value: .integer(0), sqlType: "integer"),
        Case(value: .integer(.max), sqlType: "integer"),
        Case(value: .integer(.min), sqlType: "integer"),
        Case(value: .real(1.5), sqlType: "real"),
        Case(value: .real(-1e300), sqlType: "real"),
        Case(value: .text(""), sqlType: "text"),
        Case(value: .text("héllo wörld ✓"), sqlType: "text"),
        Case(value: .text("nul\u{0}inside"), sqlType: "text"),
        Case(value: .blob([]), sqlType: "blob"),
        Case(value: .blob([0, 1, 2, 255]), sqlType: "blob"),
        Case(value: .blob([UInt8](repeating: 7, count: 100_000)), sqlType: "blob"),
        Case(value: .null, sqlType: "null"),
    ]

    @Test(arguments: cases)
    func bindByIndexRoundTrips(_ c: Case) throws {
        let db = try Database.inMemory()
        let statement = try db.prepare("SELECT ?, typeof(?1)")
        try statement.bind(c.value, at: 1)
        #expect(try statement.step())
        #expect(statement.value(at: 0) == c.value)
        #expect(statement.string(at: 1) == c.sqlType)
        #expect(statement.isNull(at: 0) == (c.value == .null))
        #expect(try !statement.step())
    }

    @Test(arguments: cases)
    func bindByNameRoundTripsThroughAStrictTable(_ c: Case) throws {
        let db = try Database.inMemory()
        try db.execute("CREATE TABLE t (v ANY) STRICT")
        let insert = try db.prepare("INSERT INTO t (v) VALUES (:v)")
        try insert.bind(c.value, named: ":v")
        try insert.execute()
        let rows = try db.query("SELECT v, typeof(v) AS type FROM t")
        #expect(rows.count == 1)
        #expect(rows.first?["v"] == c.value)
        #expect(rows.first?["type"] == .text(c.sqlType))
    }

    @Test func typedColumnAccessors() throws {
        let db = try Database.inMemory()
        let rows = try db.query("SELECT ? AS i, ? AS d, ? AS s, ? AS b, ? AS n", [42, 2.5, "x", .blob([9]), nil])
        let row = try #require(rows.first)
        #expect(try row.int64("i") == 42)
        #expect(try row.double("d") == 2.5)
        #expect(try row.string("s") == "x")
        #expect(try row.blob("b") == [9])
        #expect(try row.optionalString("n") == nil)
        #expect(try row.optionalBlob("n") == nil)
        #expect(try row.optionalInt64("i") == 42)
        // A type mismatch is an error naming the column, never a silent conversion.
        let error = #expect(throws: IndexError.self) { try row.string("i") }
        #expect(error?.kind == .unexpectedValue)
        #expect(error?.message.contains("column i") == true)
        #expect(throws: IndexError.self) { try row.int64("missing") }
    }

    @Test func unknownParameterNameAndWrongCountAreErrors() throws {
        let db = try Database.inMemory()
        let statement = try db.prepare("SELECT :a")
        let error = #expect(throws: IndexError.self) { try statement.bind(1, named: ":b") }
        #expect(error?.sql == "SELECT :a")
        #expect(throws: IndexError.self) { try statement.bind([1, 2]) }
    }

    @Test func resetAndClearBindingsAllowReuse() throws {
        let db = try Database.inMemory()
        let statement = try db.prepare("SELECT ?")
        try statement.bind(1, at: 1)
        #expect(try statement.rows().map { $0[0] } == [1])
        try statement.bind(2, at: 1)
        #expect(try statement.rows().map { $0[0] } == [2])
        statement.clearBindings()
        #expect(try statement.rows().map { $0[0] } == [.null])
    }

    @Test func statementOutlivingItsDatabaseStaysUsable() throws {
        var db: Database? = try Database.inMemory()
        let statement = try #require(try db?.prepare("SELECT 7"))
        db = nil // close_v2: the connection closes when the statement is finalized
        #expect(try statement.rows().map { $0[0] } == [7])
    }
}
