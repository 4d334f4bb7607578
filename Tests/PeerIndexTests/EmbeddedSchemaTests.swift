import Foundation
import PeerIndex
import Testing

/// The schema is written in `schema/*.sql`; the binary embeds a generated copy.
@Suite struct EmbeddedSchemaTests {
    /// `schema/` at the package root, found from this file's path.
    static let schemaDirectory = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("schema", isDirectory: true)

    @Test func embeddedCopyEqualsSchemaFiles() throws {
        let files = try FileManager.default.contentsOfDirectory(atPath: Self.schemaDirectory.path)
            .filter { $0.hasSuffix(".sql") }.sorted()
        #expect(!files.isEmpty, "no .sql files in \(Self.schemaDirectory.path)")
        let embedded = Schema.migrations
        #expect(embedded.map(\.fileName) == files,
                "embedded migrations differ from schema/ by name: run `make schema`")
        for file in files {
            let text = try String(contentsOf: Self.schemaDirectory.appendingPathComponent(file), encoding: .utf8)
            let copy = embedded.first { $0.fileName == file }
            #expect(copy?.sql == text, "embedded text of \(file) differs from schema/\(file): run `make schema`")
        }
    }

    @Test func versionsAreNumberedFromOneWithoutGaps() {
        let migrations = Schema.migrations
        #expect(migrations.map(\.version) == Array(1...migrations.count))
        for migration in migrations {
            #expect(migration.fileName == migration.name + ".sql")
            #expect(migration.name.hasPrefix(String(format: "%04d-", migration.version)))
        }
        #expect(Schema.latestVersion == migrations.count)
    }

    @Test func everyTableIsStrictAndEveryColumnIsCommented() throws {
        for migration in Schema.migrations {
            var inTable = false
            for line in migration.sql.split(separator: "\n", omittingEmptySubsequences: false) {
                let trimmed = line.trimmingCharacters(in: .whitespaces)
                if trimmed.hasPrefix("CREATE TABLE") { inTable = true; continue }
                if inTable && trimmed.hasPrefix(")") {
                    #expect(trimmed.contains("STRICT"), "\(migration.fileName): a table is not STRICT: \(trimmed)")
                    inTable = false
                    continue
                }
                // A column definition starts with a lowercase name; its comment may be on a CHECK continuation line.
                if inTable, let first = trimmed.first, first.isLowercase {
                    #expect(trimmed.contains("--"), "\(migration.fileName): column without a comment: \(trimmed)")
                }
            }
        }
    }
}
