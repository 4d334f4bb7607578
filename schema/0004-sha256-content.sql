-- 0004-sha256-content: protocol version 3 names content with SHA-256 (chunks and manifest
-- roots; the root's domain became "syncpeer-manifest-v2") instead of BLAKE2b-256. Hashes
-- stored before this migration are of the old function and match nothing a version-3 peer
-- sends or asks for.
--
-- Decisions:
-- * Our own records are not dropped: their versions are the folder's history. Each folder
--   is marked (content_hash = 'blake2b-256'); at the next start, before any folder starts
--   or any peer connects, the node hashes every live file whose size, mtime and inode are
--   still those recorded again with SHA-256 (the same chunk boundaries: the cut rule did
--   not change) and keeps its version; a file that changed meanwhile, or cannot be read,
--   loses its recorded inode so the first scan hashes it and records the change as any
--   other. Then the mark becomes 'sha256'. A crash midway repeats the pass (hashing is
--   idempotent). New folders are 'sha256' from the start.
-- * What peers told us is dropped (remote_files), and both directions of every exchange
--   start over: received_sequence and acked_sequence go back to 0, and every folder gets a
--   new index ID so a peer drops what we told it before and takes our index anew.
-- * Unfinished transfers cannot resume (their manifests are of the old hash): they end as
--   failed, with the reason; `syncpeer send` again sends the file anew.

ALTER TABLE folders ADD COLUMN content_hash TEXT NOT NULL DEFAULT 'sha256' CHECK (content_hash IN ('sha256', 'blake2b-256')); -- function of the stored chunk and root hashes: 'blake2b-256' until the start after this migration rehashed them
UPDATE folders SET content_hash = 'blake2b-256';

UPDATE folders SET index_id = (random() & 9223372036854775807) | 1;

DELETE FROM remote_files;
UPDATE folder_peers SET received_sequence = 0, acked_sequence = 0, remote_index_id = 0;

UPDATE transfers
   SET state = 'failed',
       error = 'syncpeer changed its content hash (protocol version 3): send the file again',
       updated_at = CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)
 WHERE state IN ('offered', 'active', 'paused');
