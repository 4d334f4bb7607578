-- 0005-blake3-content: protocol version 4 names content with BLAKE3 (chunks and manifest
-- roots; the root's domain became "syncpeer-manifest-v3") instead of SHA-256. Hashes stored
-- before this migration are of an older function and match nothing a version-4 peer sends
-- or asks for.
--
-- Decisions (as 0004's, for the next function):
-- * Our own records are not dropped: their versions are the folder's history. Each folder
--   is marked with the function its records hold; when the node next opens its index,
--   before its control socket, folders or peers, each live file whose size, mtime and inode
--   are still those recorded is hashed again with BLAKE3 over the same chunk ranges (the
--   cut rule did not change) and keeps its version (SyncEngine's ContentHashUpgrade). Any
--   other record keeps its old hashes, which no longer match its root as computed now: it
--   is never offered or served, and the first scan hashes the file (keeping the version
--   when size, mtime and mode are unchanged). Then the mark becomes 'blake3'; a folder whose
--   root is not the shared one stays marked for the next start. New folders are 'blake3'.
-- * The mark is a new column, content_function, which replaces 0004's content_hash (whose
--   CHECK allows only 'sha256' and 'blake2b-256': SQLite cannot change a CHECK in place).
--   The mark is copied, then content_hash is dropped. A folder left at 'blake2b-256' by
--   0004's pass, whose root was missing, keeps that mark and is rehashed the same way.
-- * What peers told us is dropped (remote_files), and both directions of every exchange
--   start over: received_sequence and acked_sequence go back to 0, so each side sends its
--   whole index again once both run version 4.
-- * Unfinished transfers cannot resume (their manifests are of the old hash): they end as
--   failed, with the reason; `syncpeer send` again sends the file anew.

ALTER TABLE folders ADD COLUMN content_function TEXT NOT NULL DEFAULT 'blake3' CHECK (content_function IN ('blake3', 'sha256', 'blake2b-256')); -- function of the stored chunk and root hashes: an older one until the start after this migration rehashed them
UPDATE folders SET content_function = content_hash;
ALTER TABLE folders DROP COLUMN content_hash;

DELETE FROM remote_files;
UPDATE folder_peers SET received_sequence = 0, acked_sequence = 0, remote_index_id = 0;

UPDATE transfers
   SET state = 'failed',
       error = 'syncpeer changed its content hash (protocol version 4): send the file again',
       updated_at = CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)
 WHERE state IN ('offered', 'active', 'paused');
