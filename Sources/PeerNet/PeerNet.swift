/// PeerNet: TCP connections, the Noise secure channel and discovery (DNS-SD over mDNS).
/// It grows with the sessions and discovery issues.
public enum PeerNet {}
