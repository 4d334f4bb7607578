-- 0004-sha256-content: protocol version 3 names content with SHA-256 (chunks and manifest
-- roots; the root's domain became "syncpeer-manifest-v2") instead of BLAKE2b-256. Hashes
-- stored before this migration are of the old function and match nothing a version-3 peer
-- sends or asks for.
--
-- Decisions:
-- * Our own records are not dropped: their versions are the folder's history. Each folder
--   is marked (content_hash = 'blake2b-256'); when the node next opens its index, before
--   its control socket, folders or peers, each live file whose size, mtime and inode are
--   still those recorded is hashed again with SHA-256 (the same chunk boundaries: the cut
--   rule did not change) and keeps its version (SyncEngine's ContentHashUpgrade). Any other
--   record keeps its old hashes, which no longer match its root as computed now: it is
--   never offered or served, and the first scan hashes the file (keeping the version when
--   size, mtime and mode are unchanged). Then the mark becomes 'sha256'; a folder whose root
--   is not the shared one stays marked for the next start. New folders are 'sha256'.
-- * What peers told us is dropped (remote_files), and both directions of every exchange
--   start over: received_sequence and acked_sequence go back to 0, so each side sends its
--   whole index again once both run version 3.
-- * Unfinished transfers cannot resume (their manifests are of the old hash): they end as
--   failed, with the reason; `syncpeer send` again sends the file anew.

ALTER TABLE folders ADD COLUMN content_hash TEXT NOT NULL DEFAULT 'sha256' CHECK (content_hash IN ('sha256', 'blake2b-256')); -- function of the stored chunk and root hashes: 'blake2b-256' until the start after this migration rehashed them
UPDATE folders SET content_hash = 'blake2b-256';

DELETE FROM remote_files;
UPDATE folder_peers SET received_sequence = 0, acked_sequence = 0, remote_index_id = 0;

UPDATE transfers
   SET state = 'failed',
       error = 'syncpeer changed its content hash (protocol version 3): send the file again',
       updated_at = CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)
 WHERE state IN ('offered', 'active', 'paused');
