# __convkit_ids prints the conversations of the store the command line
# names (--data-dir, else the environment's), "ID<tab>TITLE" a line.
__convkit_ids() {
	case $__convkit_datadir in
	"~/"*) __convkit_datadir=$HOME/${__convkit_datadir#"~/"} ;;
	esac
	if [ -n "$__convkit_datadir" ]; then
		command convkit --data-dir "$__convkit_datadir" __complete ids 2>/dev/null
	else
		command convkit __complete ids 2>/dev/null
	fi
}

# __convkit_candidates CUR WORDS... prints (and leaves in __convkit_out)
# what to offer for CUR after WORDS; __convkit_datadir is then the
# --data-dir they give.
__convkit_candidates() {
	__convkit_out=$(__convkit_candidates_of "$@")
	printf '%s\n' "$__convkit_out"
	__convkit_datadir=
	__convkit_expect=
	for __convkit_w in "$@"; do
		if [ "$__convkit_expect" = --data-dir ]; then
			__convkit_datadir=$__convkit_w
		fi
		__convkit_expect=
		case $__convkit_w in
		--) break ;;
		--data-dir=*) __convkit_datadir=${__convkit_w#--data-dir=} ;;
		--data-dir) __convkit_expect=--data-dir ;;
		-?*) __convkit_valued "$__convkit_w" && __convkit_expect=other ;;
		esac
	done
	return 0
}

__convkit_candidates_of() {
	__convkit_cur=$1
	shift
	__convkit_path=
	__convkit_given=
	__convkit_expect=
	__convkit_nargs=0
	for __convkit_w in "$@"; do
		if [ "$__convkit_given" = ended ]; then
			__convkit_nargs=$((__convkit_nargs + 1))
			continue
		fi
		if [ -n "$__convkit_expect" ]; then
			__convkit_expect=
			continue
		fi
		case $__convkit_w in
		--)
			__convkit_given=ended
			continue
			;;
		-?*=*) continue ;;
		-?*)
			if __convkit_valued "$__convkit_w"; then
				__convkit_expect=$__convkit_w
			fi
			continue
			;;
		esac
		if [ -z "$__convkit_given" ] && __convkit_name=$(__convkit_sub "$__convkit_path" "$__convkit_w"); then
			__convkit_path=${__convkit_path:+$__convkit_path }$__convkit_name
			continue
		fi
		__convkit_given=seen
		__convkit_nargs=$((__convkit_nargs + 1))
	done
	__convkit_words "$__convkit_path"
	if [ -n "$__convkit_expect" ]; then
		__convkit_value "$__convkit_path" "$__convkit_expect"
		return
	fi
	case $__convkit_cur in
	-*)
		if [ "$__convkit_given" != ended ]; then
			echo "$__convkit_flags"
			return
		fi
		;;
	esac
	if [ -z "$__convkit_given" ] && [ -n "$__convkit_subs" ]; then
		echo "$__convkit_subs"
		return
	fi
	if [ "$__convkit_nargs" = 0 ] && [ -n "$__convkit_args1" ]; then
		echo "$__convkit_args1"
		return
	fi
	echo "$__convkit_args"
}
