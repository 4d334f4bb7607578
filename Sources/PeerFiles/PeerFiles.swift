/// PeerFiles: everything that touches the user's folders — scanning, chunking, watching and
/// atomic writes. It grows with the resources and folder-sync issues.
public enum PeerFiles {}
