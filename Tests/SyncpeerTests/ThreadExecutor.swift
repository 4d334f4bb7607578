import Foundation
import Synchronization

/// A task executor with one thread of its own: tasks that prefer it
/// (`withTaskExecutorPreference`, `Task(executorPreference:)`) run there, whatever holds
/// the shared cooperative threads. Jobs run one at a time, in order.
final class ThreadExecutor: TaskExecutor, Sendable {
    private let jobs = Mutex<[UnownedJob]>([])
    private let ready = DispatchSemaphore(value: 0)

    init(name: String) {
        let thread = Thread { [self] in
            while true {
                ready.wait()
                guard let job = jobs.withLock({ $0.isEmpty ? nil : $0.removeFirst() }) else { continue }
                job.runSynchronously(on: asUnownedTaskExecutor())
            }
        }
        thread.name = name
        thread.start()
    }

    func enqueue(_ job: consuming ExecutorJob) {
        let unowned = UnownedJob(job)
        jobs.withLock { $0.append(unowned) }
        ready.signal()
    }
}
