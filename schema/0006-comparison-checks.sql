-- 0006-comparison-checks: the same CHECKs on `kind`, cheaper. SQLite evaluates
-- `kind IN ('file', 'directory', 'symlink')` (an IN list of more than two values) by building
-- a temporary b-tree of the list on every run of an INSERT or UPDATE statement: 2.3 µs of a
-- 7 µs upsert of one row, and the index takes four upserts per file synced (B: 10,000 files).
-- Written as comparisons, the check means the same and costs nothing measurable.
--
-- Every stored row passes the new check exactly as it passed the old one, so the rows stay as
-- they are and only the tables' CREATE text changes, in place: SQLite's documented way of
-- changing a CHECK constraint (https://sqlite.org/lang_altertable.html, "Making Other Kinds
-- Of Table Schema Changes"). The migrator raises `PRAGMA schema_version` after a migration
-- that sets `writable_schema`, so every connection reads the new text (see Migrator.swift).
PRAGMA writable_schema = ON;
UPDATE sqlite_schema
   SET sql = replace(sql, 'CHECK (kind IN (''file'', ''directory'', ''symlink''))',
                          'CHECK (kind = ''file'' OR kind = ''directory'' OR kind = ''symlink'')')
 WHERE type = 'table' AND name IN ('files', 'remote_files');
PRAGMA writable_schema = OFF;
