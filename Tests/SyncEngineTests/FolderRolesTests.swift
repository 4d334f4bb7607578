import PeerModel
import Testing
@testable import SyncEngine

/// The role rules (FolderRoles): every role × sender/author × live/tombstone, enforced from
/// our own settings whatever the peer's entry claims.
struct FolderRolesTests {
    static let send = PeerPolicy(role: .sendOnly)
    static let receive = PeerPolicy(role: .receiveOnly)
    static let keep = PeerPolicy(role: .both, noDeletes: true)

    /// (our policy towards devB, the state devB sent, admitted?)
    static let admitCases: [(PeerPolicy, FileEntry, Bool)] = [
        (PeerPolicy(), file(vv([devB: 1]), by: devB), true),
        (PeerPolicy(), tombstone(vv([devB: 1]), by: devB), true),
        (send, file(vv([devB: 1]), by: devB), false),
        (send, tombstone(vv([devB: 1]), by: devB), false),
        // A hostile peer that names another author is still refused as the sender.
        (send, file(vv([devB: 1, devC: 5]), by: devC), false),
        (send, file(vv([devB: 1, devA: 5]), by: devA), false),
        (receive, file(vv([devB: 1]), by: devB), true),
        (receive, tombstone(vv([devB: 1]), by: devB), true),
        (keep, file(vv([devB: 1]), by: devB), true),
        (keep, tombstone(vv([devB: 1]), by: devB), false),
        (keep, tombstone(vv([devB: 1]), by: devC), false),
        (PeerPolicy(role: .receiveOnly, noDeletes: true), tombstone(vv([devB: 1]), by: devB), false),
        (PeerPolicy(role: .sendOnly, noDeletes: true), file(vv([devB: 1]), by: devB), false),
    ]

    @Test(arguments: admitCases.indices)
    func aPeersStateIsAdmittedByOurRoleTowardsIt(_ n: Int) {
        let (policy, state, admitted) = Self.admitCases[n]
        #expect(FolderRoles.admits(state, from: devB, policies: [devB: policy]) == admitted)
    }

    /// A change made by a send-only or no-deletes peer is not taken from a third peer that
    /// forwarded it; the third peer's own changes are.
    @Test func aForwardedChangeIsJudgedByItsAuthor() {
        let policies = [devB: Self.send]
        #expect(!FolderRoles.admits(file(vv([devB: 2]), by: devB), from: devC, policies: policies))
        #expect(FolderRoles.admits(file(vv([devB: 2, devC: 1]), by: devC), from: devC, policies: policies))
        let archive = [devB: Self.keep]
        #expect(!FolderRoles.admits(tombstone(vv([devB: 2]), by: devB), from: devC, policies: archive))
        #expect(FolderRoles.admits(tombstone(vv([devC: 2]), by: devC), from: devC, policies: archive))
    }

    @Test func splitKeepsEveryStateOnOneSide() {
        let remotes = [devB: file(vv([devB: 1]), by: devB), devC: file(vv([devC: 1]), by: devC)]
        let (admitted, held) = FolderRoles.split(remotes, policies: [devB: Self.send])
        #expect(admitted.keys.sorted() == [devC])
        #expect(held.keys.sorted() == [devB])
    }

    /// With a send-only peer's state left out, the planner keeps ours even where the peer's
    /// state is newer or in conflict (the role holds in a conflict); with it in, it would pull.
    @Test func thePlannerNeverTakesWhatTheRoleHolds() {
        let planner = SyncPlanner(localDevice: devA)
        let local = file(vv([devA: 1]), content: 1, by: devA)
        for theirs in [file(vv([devA: 1, devB: 1]), content: 2, mtime: t0 + 5, by: devB),      // newer
                       file(vv([devB: 1]), content: 3, mtime: t0 + 5, by: devB),                 // concurrent, would win
                       tombstone(vv([devA: 1, devB: 1]), by: devB)] {                            // a deletion
            #expect(planner.plan(local: local, remotes: [devB: theirs]) != .upToDate)
            let admitted = FolderRoles.split([devB: theirs], policies: [devB: Self.send]).admitted
            #expect(planner.plan(local: local, remotes: admitted) == .upToDate)
        }
    }

    @Test(arguments: [
        // (held, local, not applied?)
        (file(vv([devB: 1]), by: devB), nil, true),
        (tombstone(vv([devB: 1]), by: devB), nil, false),
        (file(vv([devA: 1, devB: 1]), by: devB), file(vv([devA: 1])), true),
        (file(vv([devB: 1]), by: devB), file(vv([devB: 1])), false),
        (file(vv([devB: 1]), by: devB), file(vv([devA: 2, devB: 1])), false),
        (file(vv([devB: 2]), by: devB), file(vv([devA: 2, devB: 1])), true),
    ] as [(FileEntry, FileEntry?, Bool)])
    func aHeldStateIsListedUntilOursCoversIt(_ held: FileEntry, _ local: FileEntry?, _ expected: Bool) {
        #expect(FolderRoles.notApplied(held, local: local) == expected)
    }

    @Test func onlyOurOwnChangesStayBackFromAReceiveOnlyPeer() {
        #expect(!FolderRoles.sends(modifiedBy: devA, localDevice: devA, to: Self.receive))
        #expect(FolderRoles.sends(modifiedBy: devC, localDevice: devA, to: Self.receive))
        for policy in [PeerPolicy(), Self.send, Self.keep] {
            #expect(FolderRoles.sends(modifiedBy: devA, localDevice: devA, to: policy))
        }
    }

    @Test func locallyChangedIsOursAndNotCoveredByThePeer() {
        #expect(FolderRoles.locallyChanged(file(vv([devA: 1, devB: 1]), by: devA), peer: file(vv([devB: 1]), by: devB), localDevice: devA))
        #expect(FolderRoles.locallyChanged(file(vv([devA: 1])), peer: nil, localDevice: devA))
        #expect(!FolderRoles.locallyChanged(file(vv([devB: 1]), by: devB), peer: nil, localDevice: devA))
        #expect(!FolderRoles.locallyChanged(file(vv([devA: 1])), peer: file(vv([devA: 1])), localDevice: devA))
    }

    /// Override: ours on top of every held version, so every peer takes it as a plain update.
    @Test func overrideDominatesEveryHeldVersion() {
        let ours = file(vv([devA: 3, devB: 1]), content: 1, by: devA)
        let held = [file(vv([devB: 4]), content: 2, by: devB), tombstone(vv([devA: 3, devC: 2]), by: devC)]
        let state = FolderRoles.override(ours, over: held, localDevice: devA)
        #expect(state.version == vv([devA: 4, devB: 4, devC: 2]))
        #expect(state.hasSameContent(as: ours))
        #expect(state.modifiedBy == devA)
        for other in held + [ours] { #expect(state.version.compare(other.version) == .greater) }
        let planner = SyncPlanner(localDevice: devB)
        #expect(planner.plan(local: held[0], remotes: [devA: state]) == .pull(state, from: devA))
    }
}

/// `revert`'s pure part: the cluster's newest state comes back, above both versions, under
/// its author's name (no longer a local change); with nothing in the cluster, ours goes.
struct RevertActionTests {
    @Test func theClustersNewestStateComesBackAboveBothVersions() throws {
        let ours = file(vv([devA: 2, devB: 1]), content: 9, by: devA)
        let theirs = file(vv([devB: 1]), content: 1, by: devB)
        let action = try #require(SharedFolder.revertAction(ours: ours, cluster: [devB: theirs], localDevice: devA))
        guard case .pull(let target, let from) = action else { Issue.record("\(action)"); return }
        #expect(from == devB)
        #expect(target.hasSameContent(as: theirs) && target.modifiedBy == devB)
        #expect(target.version == vv([devA: 3, devB: 1]))
        #expect(!FolderRoles.locallyChanged(target, peer: theirs, localDevice: devA))
    }

    /// The cluster's version is one we wrote ourselves (before we became receive-only): the
    /// revert is not a local change, and it goes to the receive-only peer that holds it.
    @Test func aStateWeWroteComesBackUnderItsHoldersName() throws {
        let ours = file(vv([devA: 2]), content: 9, by: devA)
        let theirs = file(vv([devA: 1]), content: 1, by: devA)
        let action = try #require(SharedFolder.revertAction(ours: ours, cluster: [devB: theirs], localDevice: devA))
        guard case .pull(let target, devB) = action else { Issue.record("\(action)"); return }
        #expect(target.hasSameContent(as: theirs) && target.modifiedBy == devB)
        #expect(target.version == vv([devA: 3]))
        #expect(!FolderRoles.locallyChanged(target, peer: theirs, localDevice: devA))
        #expect(FolderRoles.sends(modifiedBy: target.modifiedBy, localDevice: devA, to: PeerPolicy(role: .receiveOnly)))
        // At the peer, our reverted record supersedes its own: its next edit is no conflict.
        #expect(SyncPlanner(localDevice: devB).plan(local: theirs, remotes: [devA: target]) == .updateMetadata(target, from: devA))
    }

    @Test func concurrentClusterStatesPickTheConflictWinner() throws {
        let ours = file(vv([devA: 1]), content: 9, by: devA)
        let older = file(vv([devB: 1]), content: 1, mtime: t0, by: devB)
        let newer = file(vv([devC: 1]), content: 2, mtime: t0 + 1, by: devC)
        let action = try #require(SharedFolder.revertAction(ours: ours, cluster: [devB: older, devC: newer], localDevice: devA))
        #expect(action.paths == ["doc.txt"])
        guard case .pull(let target, devC) = action else { Issue.record("\(action)"); return }
        #expect(target.hasSameContent(as: newer))
    }

    @Test func deletionsAndFilesOnlyWeHave() throws {
        let ours = file(vv([devA: 1]), content: 9, by: devA)
        guard case .delete(let gone, _)? = SharedFolder.revertAction(ours: ours, cluster: [:], localDevice: devA) else {
            Issue.record("a file only we have is not deleted"); return
        }
        #expect(gone.deleted && gone.version == vv([devA: 2]))
        guard case .delete(let tomb, devB)? = SharedFolder.revertAction(ours: ours, cluster: [devB: tombstone(vv([devB: 1]), by: devB)],
                                                                         localDevice: devA) else {
            Issue.record("the cluster's deletion does not come back"); return
        }
        #expect(tomb.version == vv([devA: 2, devB: 1]))
        #expect(SharedFolder.revertAction(ours: tombstone(vv([devA: 1])), cluster: [:], localDevice: devA) == nil)
        let same = file(vv([devB: 1]), content: 9, mode: 0o600)
        guard case .updateMetadata? = SharedFolder.revertAction(ours: ours, cluster: [devB: same], localDevice: devA) else {
            Issue.record("same content: only the metadata"); return
        }
    }
}
