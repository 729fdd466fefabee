#!/usr/bin/env bash
# Times convkit reindex on a store beside decompressing the same logs with
# the zstd tool, in one run. Usage: scripts/bench-reindex.sh [STORE]
# Without STORE it generates one of 10,000 conversations (a few minutes).
set -euo pipefail
cd "$(dirname "$0")/.."
bin=$(mktemp -d)/convkit
go build -o "$bin" ./cmd/convkit
store=${1:-}
if [[ -z $store ]]; then
	store=$(mktemp -d)/store
	"$bin" fixtures --to "$store" --seed 42 --conversations 10000 >/dev/null
fi
t() { /usr/bin/time -f "%e %M" "$@" 2>&1 >/dev/null | tail -1; }
logs=$(find "$store/conversations" -type f -name '*.jsonl*' | wc -l)
bytes=$(du -sb "$store/conversations" | cut -f1)
echo "store: $store ($logs logs, $bytes bytes)"
# Warm the page cache so both sides read from memory.
find "$store/conversations" -type f -exec cat {} + >/dev/null
read -r zs zm < <(t sh -c "find '$store/conversations' -type f -name '*.zst' -print0 | xargs -0 zstd -dcq; find '$store/conversations' -type f -name '*.jsonl' -print0 | xargs -0 cat")
read -r rs rm < <(t "$bin" --data-dir "$store" reindex)
read -r ns nm < <(t "$bin" --data-dir "$store" reindex --no-search)
read -r cs cm < <(t "$bin" --data-dir "$store" reindex --check)
read -r ls lm < <(t "$bin" --data-dir "$store" list --limit 50)
printf '%-34s %8s %10s %8s\n' operation seconds peak_KiB ratio
printf '%-34s %8s %10s %8s\n' "zstd -dc + cat of every log" "$zs" "$zm" 1.00
printf '%-34s %8s %10s %8.2f\n' "convkit reindex" "$rs" "$rm" "$(echo "$rs / $zs" | bc -l)"
printf '%-34s %8s %10s %8.2f\n' "convkit reindex --no-search" "$ns" "$nm" "$(echo "$ns / $zs" | bc -l)"
printf '%-34s %8s %10s %8.2f\n' "convkit reindex --check" "$cs" "$cm" "$(echo "$cs / $zs" | bc -l)"
printf '%-34s %8s %10s %8s\n' "convkit list --limit 50 (process)" "$ls" "$lm" -
