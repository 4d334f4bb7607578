#include <sqlite3.h>

/// Turns off SQLite's memory statistics (`SQLITE_CONFIG_MEMSTATUS`): with them on, every
/// allocation and free takes a process-wide mutex to count bytes, and nothing here reads
/// those counts. `sqlite3_config` is variadic, which Swift does not import; it only works
/// before SQLite initializes (before the first connection opens), and says so otherwise.
static inline int csqlite_disable_memory_statistics(void) {
    return sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 0);
}
