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
# snapshot and still exits 3.
#
# The restore drill, straight from the repository:
#
#   restic dump --tag convkit latest /convkit.tar.zst | convkit backup verify -
#   restic dump --tag convkit latest /convkit.tar.zst | convkit restore - --to /var/lib/convkit.new
#
# (an older one: `restic snapshots --tag convkit` lists them; dump takes a
# snapshot id instead of latest).
#
# Environment: CONVKIT (binary, default convkit on PATH), CONVKIT_DATA_DIR,
# the RESTIC_* variables, KEEP_DAILY/KEEP_WEEKLY/KEEP_MONTHLY (7/4/6),
# KEEP_LAST (0).
set -uo pipefail

ck=${CONVKIT:-convkit}
name=convkit.tar.zst
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

"$ck" --quiet backup --rsyncable --no-index --to - 2>"$tmp/convkit.err" |
	restic backup --quiet --json --stdin --stdin-filename "$name" --tag convkit >"$tmp/restic.json" 2>"$tmp/restic.err"
codes=("${PIPESTATUS[@]}")
ckcode=${codes[0]}
rscode=${codes[1]}
snap=$(sed -n 's/.*"snapshot_id":"\([0-9a-f]*\)".*/\1/p' "$tmp/restic.json" | tail -n 1)

if [ "$ckcode" -ne 0 ] && [ "$ckcode" -ne 3 ]; then
	[ -n "$snap" ] && restic forget --quiet "$snap" >/dev/null 2>&1
	msg=$(sed -n 's/^convkit: error: //p' "$tmp/convkit.err" | tail -n 1)
	echo "restic-backup: FAILED (convkit exit $ckcode): ${msg:-see the output of convkit}; the partial snapshot was forgotten" >&2
	exit "$ckcode"
fi
if [ "$rscode" -ne 0 ]; then
	echo "restic-backup: FAILED (restic exit $rscode): $(tail -n 1 "$tmp/restic.err")" >&2
	exit 1
fi
keep=(--keep-daily "${KEEP_DAILY:-7}" --keep-weekly "${KEEP_WEEKLY:-4}" --keep-monthly "${KEEP_MONTHLY:-6}")
if [ "${KEEP_LAST:-0}" -gt 0 ]; then
	keep+=(--keep-last "$KEEP_LAST")
fi
if ! restic forget --quiet --tag convkit --group-by host,tags "${keep[@]}" --prune >/dev/null 2>"$tmp/forget.err"; then
	echo "restic-backup: FAILED: restic forget: $(tail -n 1 "$tmp/forget.err")" >&2
	exit 1
fi
if [ "$ckcode" -eq 3 ]; then
	msg=$(sed -n 's/^convkit: error: //p' "$tmp/convkit.err" | tail -n 1)
	echo "restic-backup: INCOMPLETE (exit 3): $msg (snapshot $snap)" >&2
	exit 3
fi
exit 0
