-- 0011-peer-certificates: the TLS certificate ID each paired peer gave us inside the Noise
-- session (a `certificate` frame, checked to name the peer's pinned key): Syncthing's relays
-- and global discovery servers know a device by it (issue 39). One per peer, replaced when
-- the peer sends another; gone with the peer.
CREATE TABLE peer_certificates (
    device_id      TEXT    NOT NULL PRIMARY KEY                 -- the peer (peers.device_id)
                   REFERENCES peers (device_id) ON DELETE CASCADE,
    certificate_id BLOB    NOT NULL                             -- SHA-256 of the peer's TLS certificate (its certificate ID)
                   CHECK (length(certificate_id) = 32),
    learned_at     INTEGER NOT NULL                             -- when it was pinned (unix ms)
) STRICT;
