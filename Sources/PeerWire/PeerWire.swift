/// PeerWire: the syncpeer wire format — framing of Noise transport messages and the typed
/// application frames inside them. Pure value types and codecs; no I/O.
public enum PeerWire {}
