/// What the invited side tells the inviter about an invitation (a ``Frame/pairing(_:)`` frame).
package enum PairingStatus: UInt8, CaseIterable, Sendable {
    // 0 is not used, so that a zeroed byte is not mistaken for a decision.
    /// The invitation is shown to the user, who has not decided yet.
    case pending = 1
    /// The user accepted: both sides pin each other's key.
    case accepted = 2
    /// The user declined.
    case declined = 3
    /// Nobody answered before the invitation timed out.
    case expired = 4
    /// The invited node refused without asking its user (it accepts no invitations now, or the
    /// inviter is blocked).
    case refused = 5
}
