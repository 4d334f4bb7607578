-- 0010-folder-peer-roles: what each peer may change in a shared folder here, and when a batch
-- of a peer's changes is large enough to wait for the user (issue 41, points 3 and 5).
-- A role is ours towards that peer, enforced on this node whatever the peer claims:
-- 'both' (the default: every share made before keeps syncing as it did), 'send-only' (our
-- changes go to the peer, none of its changes is applied here) or 'receive-only' (its
-- changes are applied here, our local changes are not sent to it). Compared with OR, not
-- IN: see 0006.
ALTER TABLE folder_peers ADD COLUMN
    role       TEXT    NOT NULL DEFAULT 'both'                     -- our role towards this peer in this folder
               CHECK (role = 'both' OR role = 'send-only' OR role = 'receive-only');
ALTER TABLE folder_peers ADD COLUMN
    no_deletes INTEGER NOT NULL DEFAULT 0                          -- 1: this peer's deletions are not applied here (an archive)
               CHECK (no_deletes IN (0, 1));
-- The mass-change guard: a pull that would delete or replace more than guard_percent % of the
-- folder's live files, or more than guard_files files, waits for 'syncpeer confirm'.
-- 0 turns that limit off.
ALTER TABLE folders ADD COLUMN
    guard_percent INTEGER NOT NULL DEFAULT 50                      -- share of the live files (%) a pull may delete or replace
                  CHECK (guard_percent >= 0 AND guard_percent <= 100);
ALTER TABLE folders ADD COLUMN
    guard_files   INTEGER NOT NULL DEFAULT 1000                    -- files a pull may delete or replace
                  CHECK (guard_files >= 0);
