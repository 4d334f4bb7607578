/// The node index schema: the migrations of `schema/`, embedded in the binary.
package enum Schema {
    /// `PRAGMA application_id` of every syncpeer index: 0x53595043, ASCII "SYPC".
    /// It sits in the SQLite file header (offset 68), so `file(1)` and we can tell our
    /// databases from other applications' without reading any table.
    package static let applicationID: Int32 = 0x5359_5043

    /// One numbered migration, `schema/NNNN-name.sql`.
    package struct Migration: Sendable, Equatable {
        /// NNNN, from 1 without gaps.
        package let version: Int
        /// File name without ".sql", recorded in `schema_migrations.name`.
        package let name: String
        /// File name in `schema/`.
        package let fileName: String
        /// The exact text of the file.
        package let sql: String
    }

    /// Every migration this binary knows, in order.
    package static var migrations: [Migration] { embedded }

    /// The highest migration version this binary knows.
    package static var latestVersion: Int { embedded.last?.version ?? 0 }
}
