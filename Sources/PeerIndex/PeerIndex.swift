/// PeerIndex: the node's SQLite database — a small wrapper around sqlite3, numbered
/// migrations embedded from `schema/`, and typed access to settings, peers and transfers
/// (files and chunks follow with folder sync; their tables exist already).
///
/// ```
///  NodeIndex (Sendable; Mutex)      typed access: settings, peers, transfers
///     │  open: IndexFile header check → Database → validate → WAL → Migrator
///  Database / Statement / Row       the wrapper; the only code that imports CSQLite
///     │
///  sqlite3 (CSQLite)
/// ```
///
/// Every failure is an `IndexError` whose `description` is one line for the user.
package enum PeerIndex {}
