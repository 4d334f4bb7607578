/// PeerIndex: the node's SQLite database — a small wrapper around sqlite3, numbered
/// migrations embedded from `schema/`, and typed access to settings, peers, files and transfers.
public enum PeerIndex {}
