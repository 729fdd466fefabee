#!/usr/bin/env bash
# bench-backup.sh: time `convkit backup` beside `tar -cf - DIR | zstd -3 -T0`
# on the same store, in the same run, and compare time, size and peak memory.
#
#   scripts/bench-backup.sh [-n RUNS] [-c CONVERSATIONS] [-z zstd|none] [-w WORKDIR]
#
# It builds convkit, writes a store with `convkit fixtures --large`
# (CONVERSATIONS conversations, ordinary logs compressed with -z), gives it
# a metadata.db (`convkit reindex`), then runs the two pipelines RUNS times
# each, interleaved, after one warm-up run of each (warm page cache), and
# prints the medians: wall time, CPU time, peak RSS of the largest single
# process (GNU time -v), archive size and compression ratio (store bytes /
# archive bytes). A store already in WORKDIR/store is reused.
#
# Needs: go, GNU time (/usr/bin/time), tar, zstd. Nothing outside WORKDIR is
# written; WORKDIR defaults to a new temporary directory, kept for a rerun.
set -euo pipefail

runs=7
convs=2000
comp=zstd
work=""
while getopts "n:c:z:w:h" opt; do
	case $opt in
	n) runs=$OPTARG ;;
	c) convs=$OPTARG ;;
	z) comp=$OPTARG ;;
	w) work=$OPTARG ;;
	*) sed -n '2,17p' "$0"; exit 2 ;;
	esac
done
for tool in go tar zstd /usr/bin/time; do
	command -v "$tool" >/dev/null || { echo "bench-backup: $tool is needed" >&2; exit 1; }
done
[ -n "$work" ] || work=$(mktemp -d "${TMPDIR:-/tmp}/convkit-bench-backup.XXXXXX")
mkdir -p "$work"
root=$(cd "$(dirname "$0")/.." && pwd)

echo "# building convkit" >&2
(cd "$root" && go build -o "$work/convkit" ./cmd/convkit)
ck="$work/convkit"

store="$work/store"
if [ ! -d "$store" ]; then
	echo "# writing the store: fixtures --large --conversations $convs --compress $comp" >&2
	"$ck" fixtures --to "$store" --large --conversations "$convs" --compress "$comp" >&2
	"$ck" --quiet --data-dir "$store" reindex >/dev/null || [ $? -eq 3 ] # the fixtures' corrupt log: exit 3
fi
store_bytes=$(du -sb "$store" | cut -f1)
files=$(find "$store" -type f | wc -l)

# measure NAME CMD...: one run under GNU time -v; appends "wall cpu rss" to
# $work/NAME.times.
measure() {
	local name=$1
	shift
	local code=0
	/usr/bin/time -v -o "$work/time.out" "$@" >/dev/null 2>"$work/$name.err" || code=$?
	# convkit backup exits 3 when a file was left out or a log is invalid.
	if [ $code -ne 0 ] && ! { [ "$name" = convkit ] && [ $code -eq 3 ]; }; then
		cat "$work/$name.err" >&2
		exit 1
	fi
	awk -v name="$name" '
		/Elapsed \(wall clock\)/ { n = split($NF, p, ":"); wall = (n == 3) ? p[1]*3600 + p[2]*60 + p[3] : p[1]*60 + p[2] }
		/User time/ { user = $NF }
		/System time/ { sys = $NF }
		/Maximum resident set size/ { rss = $NF }
		END { printf "%.3f %.3f %d\n", wall, user + sys, rss }' "$work/time.out" >>"$work/$name.times"
}

run_convkit() {
	rm -rf "$work/out"
	measure convkit "$ck" --quiet --data-dir "$store" backup --to "$work/out"
}
run_tar() {
	measure tar sh -c "tar -cf - -C '$(dirname "$store")' '$(basename "$store")' | zstd -3 -T0 -q > '$work/ref.tar.zst'"
}

rm -f "$work/convkit.times" "$work/tar.times"
run_convkit
run_tar
rm -f "$work/convkit.times" "$work/tar.times"
for _ in $(seq "$runs"); do
	run_convkit
	run_tar
done

median() { # column file
	sort -n -k"$1","$1" "$2" | awk -v c="$1" '{ v[NR] = $c } END { print v[int((NR + 1) / 2)] }'
}
ck_size=$(stat -c %s "$work"/out/convkit-*.tar.zst)
tar_size=$(stat -c %s "$work/ref.tar.zst")
ckw=$(median 1 "$work/convkit.times")
tw=$(median 1 "$work/tar.times")
ckc=$(median 2 "$work/convkit.times")
tc=$(median 2 "$work/tar.times")
ckr=$(median 3 "$work/convkit.times")
tr=$(median 3 "$work/tar.times")

echo "store: $store ($files files, $store_bytes bytes; fixtures --large --conversations $convs --compress $comp)"
echo "machine: $(nproc) CPUs, $(uname -sr); $(zstd --version | head -1); median of $runs interleaved runs after one warm-up"
printf "%-32s %9s %9s %10s %12s %7s\n" pipeline "wall s" "cpu s" "peak MiB" "archive B" ratio
printf "%-32s %9.3f %9.3f %10.1f %12d %7.3f\n" "convkit backup --to DIR" "$ckw" "$ckc" "$(echo "$ckr/1024" | bc -l)" "$ck_size" "$(echo "$store_bytes/$ck_size" | bc -l)"
printf "%-32s %9.3f %9.3f %10.1f %12d %7.3f\n" "tar -cf - DIR | zstd -3 -T0" "$tw" "$tc" "$(echo "$tr/1024" | bc -l)" "$tar_size" "$(echo "$store_bytes/$tar_size" | bc -l)"
printf "time ratio (convkit/tar): %.2f   size ratio (convkit/tar): %.3f\n" "$(echo "$ckw/$tw" | bc -l)" "$(echo "$ck_size/$tar_size" | bc -l)"
echo "work directory (kept for a rerun with -w): $work" >&2
