-- 0007-auto-accept-folders: joining a peer's shared folders without asking is a switch of its
-- own. Before, `auto_accept` let a peer's files in and joined any folder it shared (a two-way
-- synced folder the peer can delete files in, without consent). From now on `auto_accept`
-- means files (transfers and streams) only, and every peer starts with folders off, those
-- with files on included: the user turns it on with `syncpeer auto-accept PEER folders on`.
ALTER TABLE peers ADD COLUMN
    auto_accept_folders INTEGER NOT NULL DEFAULT 0              -- 1: accept this peer's share offers (new folders) without asking
                        CHECK (auto_accept_folders IN (0, 1));
