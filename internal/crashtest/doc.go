// Package crashtest holds the SIGKILL crash harness of the convkit command
// line. It has no code of its own, only tests: it builds the real binary,
// generates a store, and for each writing job (migrate, reindex, backup,
// restore, import, delete, restore --conversation, prune) kills the process with
// SIGKILL at random moments. After every kill the inputs must be intact
// and nothing half-written published; a rerun must then finish with the
// uninterrupted run's exit code and result, leave no temporary file
// behind, and pass reindex --check. TestSIGKILLExport does the same for
// export --to FILE, whose rerun over an archive published before the kill
// must refuse to overwrite it. TestSIGKILLRuntimeAppend kills the example
// runtime (examples/runtime -append) while it appends through the store's
// typed calls, each run after its log was given a torn tail: the log must
// validate and hold every step a run reported durable exactly once. TestFullDisk runs import and restore where
// there is no room (a full tmpfs; RLIMIT_FSIZE, also where mount(2) is not
// permitted): they fail cleanly, and succeed once there is;
// TestFullDiskExport and TestFullDiskBackup do the same for export --to
// FILE and backup --to DIR.
//
// CONVKIT_CRASH_KILLS=N sets the kills per job (default 4);
// CONVKIT_CRASH_SEED=N repeats a run's kill moments;
// CONVKIT_CRASH_NO_MOUNT=1 runs TestFullDisk's fallback only. The tests
// are skipped with -short.
package crashtest
