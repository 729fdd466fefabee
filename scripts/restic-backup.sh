#!/usr/bin/env bash
# restic-backup.sh: stream a convkit backup into restic, without a local
# copy, then apply restic's retention. Silent when all is well; one line on
# stderr and a non-zero exit when not.
#
#   RESTIC_REPOSITORY=... RESTIC_PASSWORD_FILE=... restic-backup.sh
#
# Every snapshot holds one file, /convkit.tar.zst (the same name each
# time), tagged "convkit"; restic records when it was taken. The archive is
# laid out for restic to deduplicate (backup --rsyncable: an unchanged
# store adds next to nothing to the repository) and leaves the index out
# (--no-index: a restore rebuilds it). Retention then
# works as restic means it: `restic forget --tag convkit --group-by
# host,tags` keeps KEEP_DAILY daily, KEEP_WEEKLY weekly and KEEP_MONTHLY
# monthly snapshots (7/4/6) of this host's convkit snapshots, and KEEP_LAST
# (default 0: none) most recent ones whatever their day, and prunes the
# rest. (A name that changes with every snapshot would make each snapshot a
# group of its own under restic's default grouping by host and paths, and
# nothing would ever be forgotten.)
#
# A backup that failed midway leaves a truncated stream: that snapshot is
# forgotten again, so restic never holds a broken archive as the latest.
# convkit's exit 3 (the archive is complete but left a file out) keeps the
# snapshot and still exits 3. Each failure is one line on stderr naming
# the program that failed, its exit code and its last error line:
#
#   restic-backup: FAILED (restic backup exit 1): Fatal: wrong password or no key found
#   restic-backup: FAILED (convkit exit 1): no store at /var/lib/convkit; the partial snapshot was forgotten
#
# (convkit killed by SIGPIPE, exit 141, when restic stopped reading, is
# not a failure of its own and is not reported.)
#
# The restore drill, straight from the repository:
#
#   restic dump --tag convkit latest /convkit.tar.zst | convkit backup verify -
#   restic dump --tag convkit latest /convkit.tar.zst | convkit restore - --to /var/lib/convkit.new
#
# (an older one: `restic snapshots --tag convkit` lists them; dump takes a
# snapshot id instead of latest).
#
# CONVKIT_BACKUP_METRICS names a file for node_exporter's textfile
# collector (convkit backup --metrics-file): it is replaced when the
# snapshot is saved, or convkit failed (recording its exit status); when
# restic fails it is left as it was, so its last success time ages and the
# freshness alert fires.
#
# Environment: CONVKIT (binary, default convkit on PATH), CONVKIT_DATA_DIR,
# the RESTIC_* variables, KEEP_DAILY/KEEP_WEEKLY/KEEP_MONTHLY (7/4/6),
# KEEP_LAST (0), CONVKIT_BACKUP_METRICS.
set -uo pipefail

ck=${CONVKIT:-convkit}
name=convkit.tar.zst
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# last_error FILE: a program's last error line: restic's last "Fatal" line
# (a missing repository is followed by lines that only name it), else the
# last line that is not blank.
last_error() {
	line=$(grep 'Fatal' "$1" | tail -n 1)
	[ -n "$line" ] || line=$(grep -v '^[[:space:]]*$' "$1" | tail -n 1)
	printf '%s' "${line:-no error message}"
}

# The metrics go to a copy of the file beside it (convkit keeps the last
# success's figures from it), put in place once the outcome is known.
metrics=()
if [ -n "${CONVKIT_BACKUP_METRICS:-}" ]; then
	mtmp="$CONVKIT_BACKUP_METRICS.restic-backup.tmp"
	rm -f "$mtmp"
	if [ -f "$CONVKIT_BACKUP_METRICS" ] && [ ! -L "$CONVKIT_BACKUP_METRICS" ]; then
		cp "$CONVKIT_BACKUP_METRICS" "$mtmp"
	fi
	metrics=(--metrics-file "$mtmp")
	trap 'rm -rf "$tmp"; rm -f "$mtmp"' EXIT
fi
# metrics_done: put the run's metrics in place.
metrics_done() {
	if [ -n "${mtmp:-}" ] && [ -f "$mtmp" ]; then
		mv -f "$mtmp" "$CONVKIT_BACKUP_METRICS"
	fi
}

"$ck" --quiet backup --rsyncable --no-index ${metrics[@]+"${metrics[@]}"} --to - 2>"$tmp/convkit.err" |
	restic backup --quiet --json --stdin --stdin-filename "$name" --tag convkit >"$tmp/restic.json" 2>"$tmp/restic.err"
codes=("${PIPESTATUS[@]}")
ckcode=${codes[0]}
rscode=${codes[1]}
snap=$(sed -n 's/.*"snapshot_id":"\([0-9a-f]*\)".*/\1/p' "$tmp/restic.json" | tail -n 1)

# convkit's message, when convkit failed for a reason of its own: killed
# by SIGPIPE (141), it only met restic's end of the pipe closing.
ckfailed() { [ "$ckcode" -ne 0 ] && [ "$ckcode" -ne 3 ] && [ "$ckcode" -ne 141 ]; }
ckmsg() {
	msg=$(sed -n 's/^convkit: error: //p' "$tmp/convkit.err" | tail -n 1)
	printf '%s' "${msg:-$(last_error "$tmp/convkit.err")}"
}

# forget_partial: a snapshot of a stream convkit did not finish must never
# stay (nor become the latest); says why when it cannot be forgotten.
forget_partial() {
	[ -n "$snap" ] || return 0
	restic forget --quiet "$snap" >/dev/null 2>"$tmp/forget.err"
	fcode=$?
	if [ "$fcode" -ne 0 ]; then
		echo "restic-backup: FAILED (restic forget exit $fcode): the partial snapshot $snap was not forgotten: $(last_error "$tmp/forget.err")" >&2
	fi
}

# convkit failing on its own comes first: restic's failure, if any, may
# only be the empty or cut stream it was given.
if ckfailed; then
	if [ -n "$snap" ]; then
		forget_partial
		what="the partial snapshot was forgotten"
	else
		what="no snapshot was saved"
	fi
	echo "restic-backup: FAILED (convkit exit $ckcode): $(ckmsg); $what" >&2
	metrics_done
	if [ "$rscode" -ne 0 ]; then
		echo "restic-backup: FAILED (restic backup exit $rscode): $(last_error "$tmp/restic.err")" >&2
	fi
	exit "$ckcode"
fi
if [ "$rscode" -ne 0 ]; then
	echo "restic-backup: FAILED (restic backup exit $rscode): $(last_error "$tmp/restic.err")" >&2
	forget_partial
	exit 1
fi
if [ "$ckcode" -ne 0 ] && [ "$ckcode" -ne 3 ]; then
	# Killed by SIGPIPE while restic succeeded: the stream is cut.
	forget_partial
	echo "restic-backup: FAILED (convkit exit $ckcode): the stream was cut; the partial snapshot was forgotten" >&2
	exit "$ckcode"
fi
# The snapshot is saved: the run's metrics stand.
metrics_done
keep=(--keep-daily "${KEEP_DAILY:-7}" --keep-weekly "${KEEP_WEEKLY:-4}" --keep-monthly "${KEEP_MONTHLY:-6}")
if [ "${KEEP_LAST:-0}" -gt 0 ]; then
	keep+=(--keep-last "$KEEP_LAST")
fi
restic forget --quiet --tag convkit --group-by host,tags "${keep[@]}" --prune >/dev/null 2>"$tmp/forget.err"
fcode=$?
if [ "$fcode" -ne 0 ]; then
	echo "restic-backup: FAILED (restic forget exit $fcode): $(last_error "$tmp/forget.err")" >&2
	exit 1
fi
if [ "$ckcode" -eq 3 ]; then
	echo "restic-backup: INCOMPLETE (exit 3): $(ckmsg) (snapshot $snap)" >&2
	exit 3
fi
exit 0
