import Foundation

/// Issue 41's invariant for `make chaos`: every version a node replaced is either current
/// somewhere or kept by policy. What a node replaces itself (a member's edit or deletion
/// applied over its file, a conflict resolved, a damaged file repaired, a restore over a file)
/// is kept in its versions store before it goes: each such version its `history` lists must be
/// held there, whole (the versions the policy thinned out are no longer listed). A version
/// the user replaced here (`local-edit`, `local-delete`) is gone from the disk before the node
/// sees it, and may be listed as not held; it is held by the nodes that replaced it in turn.
extension ChaosRun {
    static let replacedByTheNode: Set<String> = ["peer-edit", "peer-delete", "conflict", "verify", "restore"]

    func versionFailures() -> [String] {
        var failures: [String] = []
        var kept = 0
        for name in ChaosCluster.names {
            guard let daemon = cluster.daemons[name], let folder = cluster.folders[name] else { continue }
            let listed = try? cluster.env.cli(daemon, ["history", folder, "--json"])
            guard let listed, listed.status == 0,
                  let object = (try? JSONSerialization.jsonObject(with: Data(listed.stdout.utf8))) as? [String: Any] else {
                failures.append("history of the folder on \(name) failed: \(listed?.stderr ?? "no answer")")
                continue
            }
            let replaced = (object["versions"] as? [[String: Any]] ?? []).filter {
                $0["local"] as? Bool == true && Self.replacedByTheNode.contains($0["reason"] as? String ?? "")
            }
            kept += replaced.count
            let lost = replaced.filter { $0["held"] as? Bool != true }
            if !lost.isEmpty {
                let what = lost.prefix(10).map { "\($0["path"] as? String ?? "?") (\($0["reason"] as? String ?? "?"), \($0["id"] as? String ?? "?"))" }
                failures.append("\(lost.count) of the \(replaced.count) version(s) \(name) replaced are not kept: " + what.joined(separator: "; "))
            }
        }
        print("chaos: \(kept) replaced version(s) kept across the nodes")
        return failures
    }
}
