-- 0003-folder-root-identity: which directory a shared folder's root is, so that a root that
-- vanished or was replaced (an unmounted disk leaves an empty mount point; a moved folder
-- leaves nothing or a new empty directory) is never scanned as "everything was deleted".
--
-- Decisions:
-- * The identity is the device and inode of the root (stat st_dev, st_ino), recorded when
--   the folder is shared or accepted, or at the first start that finds the root plausible
--   for a folder added before this migration (NULL until then). A marker file in the root
--   (.syncpeer-folder, holding the folder ID) is the second half of the identity; it lives
--   on disk, not here.
-- * Both columns are NULL or both are set (one call of NodeIndex.setFolderRoot writes
--   them): half an identity cannot be checked. The 64-bit unsigned values are stored as
--   their bit pattern in a signed INTEGER, so any value round-trips.
-- * A user who really moved the folder re-adopts it (`syncpeer confirm DIR`), which records
--   the new identity; nothing else changes it.

ALTER TABLE folders ADD COLUMN root_device INTEGER; -- st_dev of the folder root as adopted; NULL before it was recorded
ALTER TABLE folders ADD COLUMN root_inode INTEGER; -- st_ino of the folder root as adopted; NULL before it was recorded
