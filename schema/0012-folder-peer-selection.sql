-- 0012-folder-peer-selection: the subtrees each member of a folder said it holds (selective
-- sync seen by the others, `Frame.folderSelection`), so that `status` counts a member over
-- what it holds across a restart of this node, before the member connects and says it
-- again. A display hint only: nothing is served, sent or applied differently for it. A
-- member without rows holds the whole folder. Gone with the folder or the membership.
CREATE TABLE folder_peer_selection (
    folder_id TEXT NOT NULL,                                       -- the shared folder
    device_id TEXT NOT NULL,                                       -- the member that said it
    path      TEXT NOT NULL CHECK (path <> ''),                    -- a subtree it holds, relative to the root, '/'-separated
    PRIMARY KEY (folder_id, device_id, path),
    FOREIGN KEY (folder_id, device_id) REFERENCES folder_peers (folder_id, device_id) ON DELETE CASCADE
) STRICT, WITHOUT ROWID;
