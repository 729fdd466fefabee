#!/usr/bin/env bash
# Times convkit migrate beside the zstd tool doing the same byte work, in one
# run: on the largest older-version log of a generated store, and over the
# whole store with 1 and 2 jobs.
# Usage: [LOG_SIZE=200MiB] scripts/bench-migrate.sh [CONVERSATIONS]   (default 300, with --large)
set -euo pipefail
cd "$(dirname "$0")/.."
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
bin=$work/convkit
go build -o "$bin" ./cmd/convkit
n=${1:-300}
"$bin" fixtures --to "$work/gen" --seed 7 --conversations "$n" --large >/dev/null
t() { /usr/bin/time -f "%e %M" "$@" 2>&1 >/dev/null | tail -1; }
fresh() { rm -rf "$work/s"; cp -a "$work/gen" "$work/s"; export TMPDIR=$work/tmp; rm -rf "$TMPDIR"; mkdir -p "$TMPDIR"; }

# Older-version logs of the store, and their plain size.
mapfile -t olds < <(find "$work/gen/conversations" -type f \( -name '*.v[0-3].jsonl*' -o -name '*[!4].jsonl.zst' -o -regex '.*/[^.]*\.jsonl\(\.zst\)?' \) | sort)
plain=0
for f in "${olds[@]}"; do
	case $f in *.zst) b=$(zstd -dc "$f" | wc -c) ;; *) b=$(stat -c %s "$f") ;; esac
	plain=$((plain + b))
done
echo "store: $n conversations, ${#olds[@]} older logs, $plain plain bytes"

# One large v3 log (LOG_SIZE, default 200MiB): convkit migrate on a store
# holding just it, beside zstd -dc | zstd -3 -T1 of the same file.
fresh
mkdir -p "$work/one/conversations/c"
big=$work/one/conversations/c/large.v3.jsonl.zst
go run ./scripts/genlog -version 3 -size "${LOG_SIZE:-200MiB}" -zstd "$big"
bigplain=$(zstd -dc "$big" | wc -c)
echo "large log: $(basename "$big") ($bigplain plain bytes)"
read -r rs rm < <(t sh -c "zstd -dcf '$big' | zstd -3 -T1 -q > '$work/ref.zst'")
read -r ms mm < <(t "$bin" --data-dir "$work/one" migrate --jobs 1)
printf '%-44s %8s %10s %9s\n' operation seconds peak_KiB MB/s
mbs() { echo "$1 / $2 / 1000000" | bc -l | xargs printf '%.0f'; }
printf '%-44s %8s %10s %9s\n' "zstd -dc | zstd -3 -T1 (large log)" "$rs" "$rm" "$(mbs "$bigplain" "$rs")"
printf '%-44s %8s %10s %9s  ratio %.2f\n' "convkit migrate (large log)" "$ms" "$mm" "$(mbs "$bigplain" "$ms")" "$(echo "$rs / $ms" | bc -l)"

# The whole store, 1 and 2 jobs, beside the per-file pipeline run one and
# two at a time.
pipe="zstd -dcf \"\$0\" | zstd -3 -T1 -q -o \"\$0.ref.zst\" -f"
fresh
read -r p1 pm1 < <(t sh -c "printf '%s\0' $(printf "'%s' " "${olds[@]}") | xargs -0 -n1 -P1 sh -c '$pipe'")
fresh
read -r p2 pm2 < <(t sh -c "printf '%s\0' $(printf "'%s' " "${olds[@]}") | xargs -0 -n1 -P2 sh -c '$pipe'")
find "$work/gen" -name '*.ref.zst' -delete
fresh
read -r c1 cm1 < <(t "$bin" --data-dir "$work/s" migrate --jobs 1)
fresh
read -r c2 cm2 < <(t "$bin" --data-dir "$work/s" migrate --jobs 2)
printf '%-44s %8s %10s %9s\n' "per-file zstd pipeline, 1 at a time" "$p1" "$pm1" "$(mbs "$plain" "$p1")"
printf '%-44s %8s %10s %9s\n' "per-file zstd pipeline, 2 at a time (-P2)" "$p2" "$pm2" "$(mbs "$plain" "$p2")"
printf '%-44s %8s %10s %9s  ratio %.2f vs -P1\n' "convkit migrate --jobs 1" "$c1" "$cm1" "$(mbs "$plain" "$c1")" "$(echo "$p1 / $c1" | bc -l)"
printf '%-44s %8s %10s %9s  ratio %.2f vs -P2\n' "convkit migrate --jobs 2" "$c2" "$cm2" "$(mbs "$plain" "$c2")" "$(echo "$p2 / $c2" | bc -l)"
echo "(ratio > 1: convkit is faster than the reference)"
