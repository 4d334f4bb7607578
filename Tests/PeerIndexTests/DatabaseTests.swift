import Foundation
import PeerIndex
import Testing

/// The wrapper: errors with context, scripts, transactions.
@Suite struct DatabaseTests {
    @Test func badQueryErrorCarriesSQLMessageCodeAndPath() throws {
        try withTemporaryDirectory { dir in
            let path = dir.appendingPathComponent("plain.db").path
            let db = try Database.open(path: path)
            let error = #expect(throws: IndexError.self) { try db.query("SELECT * FROM nope") }
            #expect(error?.kind == .sqlite)
            #expect(error?.operation == "prepare")
            #expect(error?.sql == "SELECT * FROM nope")
            #expect(error?.message == "no such table: nope")
            #expect(error?.primaryResultCode == 1)
            #expect(error?.path == path)
            let line = error?.description ?? ""
            #expect(line.contains(path) && line.contains("no such table: nope") && line.contains("SELECT * FROM nope"))
            #expect(!line.contains("\n"))
        }
    }

    @Test func constraintErrorFromStepCarriesExtendedCode() throws {
        let db = try Database.inMemory()
        try db.execute("CREATE TABLE t (n INTEGER NOT NULL CHECK (n > 0)) STRICT")
        let error = #expect(throws: IndexError.self) { try db.execute("INSERT INTO t (n) VALUES (?)", [0]) }
        #expect(error?.operation == "step")
        #expect(error?.resultCode == 275) // SQLITE_CONSTRAINT_CHECK
        #expect(error?.message.contains("CHECK constraint failed") == true)
        #expect(error?.description.contains("SQLITE_CONSTRAINT_CHECK") == true)
    }

    @Test func scriptErrorNamesTheFailingStatementAndKeepsEarlierOnes() throws {
        let db = try Database.inMemory()
        let error = #expect(throws: IndexError.self) {
            try db.execute("""
                CREATE TABLE a (x INTEGER) STRICT;
                -- a comment
                INSERT INTO b VALUES (1);
                CREATE TABLE c (y INTEGER) STRICT;
                """)
        }
        #expect(error?.sql?.hasPrefix("INSERT INTO b") == true)
        #expect(try db.query("SELECT name FROM sqlite_schema ORDER BY name").map { $0[0] } == ["a"])
    }

    @Test func multilineSQLIsOneLineInTheDescription() throws {
        let db = try Database.inMemory()
        let error = #expect(throws: IndexError.self) { try db.query("SELECT\n  *\nFROM\n  nope") }
        #expect(error?.sql == "SELECT\n  *\nFROM\n  nope")
        #expect(error?.description.contains("SQL: SELECT * FROM nope") == true)
    }

    @Test func prepareRefusesASecondStatement() throws {
        let db = try Database.inMemory()
        #expect(throws: IndexError.self) { try db.prepare("SELECT 1; SELECT 2") }
        #expect(try db.prepare("SELECT 1;  ").rows().count == 1)
    }

    @Test func transactionCommitsOrRollsBack() throws {
        let db = try Database.inMemory()
        try db.execute("CREATE TABLE t (n INTEGER) STRICT")
        try db.transaction { try db.execute("INSERT INTO t VALUES (?)", [1]) }
        struct Boom: Error {}
        #expect(throws: Boom.self) {
            try db.transaction {
                try db.execute("INSERT INTO t VALUES (?)", [2])
                throw Boom()
            }
        }
        #expect(!db.isInTransaction)
        #expect(try db.query("SELECT n FROM t").map { $0[0] } == [1])
    }

    @Test func nestedTransactionRollsBackOnlyTheInnerPart() throws {
        let db = try Database.inMemory()
        try db.execute("CREATE TABLE t (n INTEGER) STRICT")
        struct Boom: Error {}
        try db.transaction {
            try db.execute("INSERT INTO t VALUES (?)", [1])
            try? db.transaction {
                try db.execute("INSERT INTO t VALUES (?)", [2])
                throw Boom()
            }
            try db.execute("INSERT INTO t VALUES (?)", [3])
        }
        #expect(try db.query("SELECT n FROM t ORDER BY n").map { $0[0] } == [1, 3])
    }

    @Test func openConfiguresWALForeignKeysAndBusyTimeout() throws {
        try withTemporaryDirectory { dir in
            let db = try Database.open(path: dir.appendingPathComponent("x.db").path)
            #expect(try db.query("PRAGMA journal_mode").first?[0] == "wal")
            #expect(try db.query("PRAGMA synchronous").first?[0] == 2) // FULL: durable when committed
            #expect(try db.query("PRAGMA foreign_keys").first?[0] == 1)
            #expect(try db.query("PRAGMA busy_timeout").first?[0] == 5_000)
        }
    }

    @Test func openingInAMissingDirectoryIsAClearError() throws {
        try withTemporaryDirectory { dir in
            let path = dir.appendingPathComponent("no/such/dir/index.db").path
            let error = #expect(throws: IndexError.self) { try NodeIndex.open(at: path) }
            #expect(error?.kind == .cannotOpen)
            #expect(error?.description.contains(path) == true)
        }
    }
}
