/// The node index schema: the migrations of `schema/`, embedded in the binary.
public enum Schema {
    /// `PRAGMA application_id` of every syncpeer index: 0x53595043, ASCII "SYPC".
    /// It sits in the SQLite file header (offset 68), so `file(1)` and we can tell our
    /// databases from other applications' without reading any table.
    public static let applicationID: Int32 = 0x5359_5043

    /// One numbered migration, `schema/NNNN-name.sql`.
    public struct Migration: Sendable, Equatable {
        /// NNNN, from 1 without gaps.
        public let version: Int
        /// File name without ".sql", recorded in `schema_migrations.name`.
        public let name: String
        /// File name in `schema/`.
        public let fileName: String
        /// The exact text of the file.
        public let sql: String
    }

    /// Every migration this binary knows, in order.
    public static var migrations: [Migration] { embedded }

    /// The highest migration version this binary knows.
    public static var latestVersion: Int { embedded.last?.version ?? 0 }
}
