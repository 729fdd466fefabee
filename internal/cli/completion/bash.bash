
_convkit() {
	local cur=${COMP_WORDS[COMP_CWORD]} out w words= files= line id
	__convkit_candidates "$cur" "${COMP_WORDS[@]:1:COMP_CWORD-1}" >/dev/null
	out=$__convkit_out
	COMPREPLY=()
	for w in $out; do
		case $w in
		@files | @dirs) files=1 ;;
		esac
	done
	for w in $out; do
		case $w in
		@files)
			compopt -o filenames 2>/dev/null
			COMPREPLY+=($(compgen -f -- "$cur"))
			;;
		@dirs)
			compopt -o filenames 2>/dev/null
			COMPREPLY+=($(compgen -d -- "$cur"))
			;;
		@ids)
			# An id may hold blanks: quoted here, or by bash when it
			# quotes file names.
			while IFS= read -r line; do
				id=${line%%$'\t'*}
				[[ $id == "$cur"* ]] || continue
				if [ -n "$files" ]; then
					COMPREPLY+=("$id")
				else
					COMPREPLY+=("$(printf '%q' "$id")")
				fi
			done < <(__convkit_ids)
			;;
		*) words="$words $w" ;;
		esac
	done
	if [ -n "$words" ]; then
		COMPREPLY+=($(compgen -W "$words" -- "$cur"))
	fi
}
complete -F _convkit convkit
