#!/bin/sh
# backup-cron.sh: the nightly backup of a convkit store, with retention.
#
#   backup-cron.sh DIR [KEEP]
#
# Writes one archive, convkit-<UTC time>.tar.zst, into DIR (created 0700,
# like everything in it private to the user) and then keeps only the newest
# KEEP (default 14) of convkit's archives there. With
# CONVKIT_BACKUP_VERIFY=1 it then runs the restore drill on the new archive
# (convkit backup verify, which records the result beside the archive for
# `convkit backup list DIR`). Silent when all is well: for cron, which mails
# any output. Otherwise it prints one line on stderr and exits with
# convkit's code:
#
#   convkit-backup: FAILED (exit 1): <convkit's error>
#   convkit-backup: INCOMPLETE (exit 3): <what was left out> (details: DIR/convkit-backup.log)
#   convkit-backup: INVALID (exit 3): verify of <archive> found N invalid log(s); the first: <log>: <problem> (details: DIR/convkit-backup.log)
#
# (exit 3: the archive was written, but a file could not be read, or a log
# failed its check and was archived as it is; or the restore drill found a
# log that does not read, corrupt in the store as in the archive.) convkit's
# full stderr of the last run, and the verify's INVALID lines, are kept in
# DIR/convkit-backup.log, which retention never touches.
#
# Environment: CONVKIT (the binary, default: convkit on PATH),
# CONVKIT_DATA_DIR (the store; convkit's own default otherwise),
# CONVKIT_BACKUP_VERIFY=1 (verify the new archive), CONVKIT_BACKUP_METRICS
# (a file for node_exporter's textfile collector: backup --metrics-file),
# TMPDIR (where verify extracts; it needs room for the store).
#
# crontab line (03:15 every night, 14 archives kept, verified):
#
#   15 3 * * *  CONVKIT_DATA_DIR=/var/lib/convkit CONVKIT_BACKUP_VERIFY=1 /usr/local/bin/backup-cron.sh /var/backups/convkit 14
#
# The runtime may keep running: the backup copies each log's committed
# prefix while it appends (an "online" backup, recorded in the manifest).
set -u

dir=${1:-}
keep=${2:-14}
if [ -z "$dir" ]; then
	echo "usage: backup-cron.sh DIR [KEEP]" >&2
	exit 2
fi
ck=${CONVKIT:-convkit}
# Everything this script creates is private: the directory 0700 (and any
# parent it has to make), the log 0600.
umask 077
if ! mkdir -p "$dir" 2>/dev/null; then
	echo "convkit-backup: FAILED: cannot create $dir" >&2
	exit 1
fi
log="$dir/convkit-backup.log"

# fail CODE: print the one line for convkit's failure with CODE.
fail() {
	code=$1
	msg=$(sed -n 's/^convkit: error: //p' "$log" | tail -n 1)
	[ -n "$msg" ] || msg=$(tail -n 1 "$log")
	if [ "$code" -eq 3 ]; then
		echo "convkit-backup: INCOMPLETE (exit 3): $msg (details: $log)" >&2
	else
		echo "convkit-backup: FAILED (exit $code): $msg" >&2
	fi
	exit "$code"
}

if [ -n "${CONVKIT_BACKUP_METRICS:-}" ]; then
	out=$("$ck" --quiet backup --to "$dir" --keep "$keep" --metrics-file "$CONVKIT_BACKUP_METRICS" 2>"$log")
else
	out=$("$ck" --quiet backup --to "$dir" --keep "$keep" 2>"$log")
fi
code=$?
if [ $code -ne 0 ] && [ $code -ne 3 ]; then
	fail $code
fi
archive=$(printf '%s\n' "$out" | sed -n 's/^Archive: //p')
if [ "${CONVKIT_BACKUP_VERIFY:-0}" = 1 ] && [ -n "$archive" ]; then
	vout=$("$ck" --quiet backup verify "$archive" 2>>"$log")
	vcode=$?
	# Exit 3: it verified, but holds logs that do not read (INVALID lines).
	if [ $vcode -ne 0 ] && [ $vcode -ne 3 ]; then
		msg=$(sed -n 's/^convkit: error: //p' "$log" | tail -n 1)
		echo "convkit-backup: FAILED (exit $vcode): verify of $archive: $msg" >&2
		exit $vcode
	fi
	# The drill reads every log strictly: a log that does not read is
	# corrupt in the store too (the archive holds its very bytes).
	invalid=$(printf '%s\n' "$vout" | grep '^INVALID ')
	if [ -n "$invalid" ]; then
		printf '%s\n' "$invalid" >>"$log"
		n=$(printf '%s\n' "$invalid" | wc -l | tr -d ' ')
		first=$(printf '%s\n' "$invalid" | head -n 1 | sed 's/^INVALID //')
		echo "convkit-backup: INVALID (exit 3): verify of $archive found $n invalid log(s); the first: $first (details: $log)" >&2
		exit 3
	fi
fi
if [ $code -eq 3 ]; then
	fail 3
fi
exit 0
