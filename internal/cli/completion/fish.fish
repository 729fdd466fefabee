# __convkit_at PATH [noargs|arg]: the words before the cursor name the
# command PATH ("" is none yet); with "noargs", no argument has been given
# and no option waits for its value; with "arg", no option waits for its
# value.
function __convkit_at
	set -l path ''
	set -l args 0
	set -l expect 0
	set -l words (commandline -opc)
	set -e words[1]
	for w in $words
		if test $expect = 1
			set expect 0
			continue
		end
		switch $w
			case '--'
				set args 1
				break
			case '-?*=*'
				continue
			case '-?*'
				if contains -- $w $__convkit_valued
					set expect 1
				end
				continue
		end
		if test $args = 0; and set -l i (contains -i -- "$path:$w" $__convkit_subs)
			set path (string trim -- "$path $__convkit_names[$i]")
			continue
		end
		set args 1
	end
	test "$path" = "$argv[1]"; or return 1
	switch "$argv[2]"
		case noargs
			test $args = 0; and test $expect = 0
		case arg
			test $expect = 0
	end
end

# __convkit_ids prints the conversations of the store the command line
# names (--data-dir, else the environment's), "ID<tab>TITLE" a line.
function __convkit_ids
	set -l dd
	set -l next 0
	for w in (commandline -opc)
		if test $next = 1
			set dd $w
			set next 0
			continue
		end
		switch $w
			case --data-dir
				set next 1
			case '--data-dir=*'
				set dd (string replace -- --data-dir= '' $w)
		end
	end
	if test -n "$dd"
		command convkit --data-dir $dd __complete ids 2>/dev/null
	else
		command convkit __complete ids 2>/dev/null
	end
end

complete -c convkit -f
