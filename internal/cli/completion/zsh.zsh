
_convkit() {
	local out w line
	local -a plain ids
	__convkit_candidates "${words[CURRENT]}" "${(@)words[2,CURRENT-1]}" >/dev/null
	out=$__convkit_out
	for w in ${=out}; do
		case $w in
		@files) _files ;;
		@dirs) _files -/ ;;
		@ids)
			# ID:TITLE for _describe, a colon in the id escaped.
			while IFS= read -r line; do
				ids+=("${${line%%$'\t'*}//:/\\:}:${line#*$'\t'}")
			done < <(__convkit_ids)
			_describe -t conversations 'conversation' ids
			;;
		*) plain+=($w) ;;
		esac
	done
	if (( ${#plain} )); then
		compadd -- $plain
	fi
}

if [ "$funcstack[1]" = _convkit ]; then
	_convkit "$@"
else
	compdef _convkit convkit
fi
