package cli

import (
	"fmt"
	"strings"
)

// example is one invocation a command's help and the man page show.
type example struct {
	line string
	note string
}

// commandExamples are the EXAMPLES of each command, by its path as typed
// after convkit ("" is the program's own help): two to four each.
var commandExamples = map[string][]example{
	"": {
		{"convkit list", "the conversations, newest first"},
		{"convkit help migrate", "the help of one command (as convkit migrate --help)"},
		{"convkit -q migrate && convkit -q reindex", "for cron: bring older logs forward, rebuild the index, print only problems"},
		{"convkit --data-dir /srv/convkit backup --to /backups --keep 14", "a backup of another store, keeping the newest 14"},
	},
	"reindex": {
		{"convkit reindex", "rebuild metadata.db from the logs (stop the runtime first)"},
		{"convkit reindex --incremental", "replay only the conversations whose logs changed"},
		{"convkit reindex --check", "compare the logs with the index, write nothing"},
	},
	"repair": {
		{"convkit repair --dry-run", "what a crash left open, and what repair would append"},
		{"convkit repair", "close the turns left open, finish deletions, remove temporary files"},
	},
	"rename": {
		{"convkit rename 0f7186fa 'Config loader refactor'", "set the title of the conversation whose id starts 0f7186fa"},
		{"convkit rename 0f7186fa-c74c-4bb0-9bd8-4ca3eb3f387b 'Config loader'", "the same, by the whole id"},
	},
	"archive": {
		{"convkit archive 0f7186fa a913a456", "hide two conversations from the main list (convkit list --archived shows them)"},
		{"convkit --json archive 0f7186fa", "the same for one, the outcome as JSON"},
	},
	"unarchive": {
		{"convkit unarchive 0f7186fa", "bring one back to the main list"},
		{"convkit -q unarchive 0f7186fa a913a456", "two, printing nothing unless something fails"},
	},
	"delete": {
		{"convkit delete --dry-run 0f7186fa", "what would be deleted: title, files, size"},
		{"convkit delete 0f7186fa", "delete the conversation whose id starts 0f7186fa (on a terminal, after asking)"},
		{"convkit delete --yes 6b228548 42c9e872", "a fork source and its fork together, without asking"},
	},
	"lock": {
		{"convkit lock status", "whether runtime.lock is held, and by whom"},
		{"convkit --json lock status", "the same as one JSON object"},
	},
	"lock status": {
		{"convkit lock status", "runtime.lock: free, or held by pid N (COMMAND) on HOST since TIME"},
		{"convkit --data-dir /srv/convkit lock status --json", "of another store, as JSON"},
	},
	"migrate": {
		{"convkit migrate --dry-run", "what each older log would become, and the space needed"},
		{"convkit migrate --jobs 4", "convert, four logs at a time"},
		{"convkit migrate --sessions-dir ~/.dsh/sessions", "a sessions root in the runtime's own layout"},
		{"convkit -q migrate --prune", "for cron: only problems and the summary; then remove the older generations"},
	},
	"prune": {
		{"convkit prune --dry-run", "which older generations the v4 successors hold, and the space they take"},
		{"convkit prune", "remove them"},
		{"convkit prune --sessions-dir ~/.dsh/sessions", "the same in a sessions root in the runtime's own layout"},
	},
	"backup": {
		{"convkit backup --to /backups --keep 14", "one archive into /backups, keeping the newest 14"},
		{"convkit backup --to /backups --dry-run", "what would be archived and deleted"},
		{"convkit -q backup --to - | restic backup --stdin --stdin-filename convkit.tar.zst", "stream the archive to restic"},
	},
	"backup verify": {
		{"convkit backup verify /backups/latest", "the restore drill on the newest archive"},
		{"convkit backup verify --work-dir /scratch /backups/latest", "extract under /scratch instead of $TMPDIR"},
	},
	"backup latest": {
		{"convkit backup latest /backups", "the path of the newest archive"},
		{"convkit -q backup latest /backups --max-age 26h --verified", "for cron: exit 1 unless a verified archive is at most 26 hours old"},
	},
	"backup list": {
		{"convkit backup list /backups", "each archive: time, size, conversations, verified"},
		{"convkit --json backup list /backups", "the same, for a script"},
	},
	"restore": {
		{"convkit restore /backups/latest --to /srv/convkit-restored", "the whole store, into a new directory"},
		{"convkit restore /backups/latest --to /srv/convkit --conversation 0f7186fa-c74c-4bb0-9bd8-4ca3eb3f387b", "one conversation back, with its fork ancestors"},
		{"convkit restore /backups/latest --to /srv/convkit --force", "replace the store, moving the old one aside"},
	},
	"export": {
		{"convkit export --dry-run 0f7186fa", "what the archive would hold, fork ancestors included"},
		{"convkit export 0f7186fa c20eab7a --to /tmp/two.tar.zst", "two conversations into one archive"},
		{"convkit export 0f7186fa --to - | ssh laptop convkit import -", "straight to another machine"},
	},
	"import": {
		{"convkit import --dry-run /tmp/two.tar.zst", "verify the archive and print the plan"},
		{"convkit import /tmp/two.tar.zst --map-cwd /home/dev/src=/home/me/src", "import, recording the working directories as under /home/me/src"},
		{"convkit import /tmp/two.tar.zst --on-conflict skip", "keep this machine's copy of a conversation that diverged"},
	},
	"list": {
		{"convkit list", "the conversations, newest first, archived ones left out"},
		{"convkit list --all --limit 20", "the newest 20, archived ones too"},
		{"convkit list --will-not-open", "those that will not open on this machine, and why"},
		{"convkit --json list", "the same as JSON"},
	},
	"search": {
		{"convkit search 'retry*'", "messages with a word starting retry"},
		{"convkit search '\"exponential backoff\" NOT jitter' --limit 5", "a phrase without a word, the best 5"},
	},
	"inspect": {
		{"convkit inspect --stats 0f7186fa", "a conversation's own log: sizes by event type"},
		{"convkit inspect --history 0f7186fa metadata", "the history a model reads of one session (here the session named metadata)"},
		{"convkit inspect --validate /srv/convkit/conversations/0f7186fa-c74c-4bb0-9bd8-4ca3eb3f387b/metadata.v4.jsonl.zst", "every problem of one log file, with its position"},
		{"zstd -dc old.v3.jsonl.zst | convkit inspect -", "a log on stdin"},
	},
	"version": {
		{"convkit version", "convkit and its version"},
		{"convkit --json version", "with the Go version, the modules and the revision"},
	},
	"help": {
		{"convkit help", "the commands by group, the global options"},
		{"convkit help backup verify", "the help of one command"},
	},
	"completion": {
		{"convkit completion bash > /etc/bash_completion.d/convkit", "bash completion for every user"},
		{"convkit completion zsh > \"${fpath[1]}/_convkit\"", "zsh"},
		{"convkit completion fish > ~/.config/fish/completions/convkit.fish", "fish"},
	},
	"man": {
		{"convkit man | man -l -", "read the man page"},
		{"convkit man > /usr/local/share/man/man1/convkit.1", "install it"},
	},
	"fixtures": {
		{"convkit fixtures --to /tmp/store --work-root /tmp/store-work", "a generated store whose conversations open here"},
		{"convkit fixtures --to /tmp/big --conversations 2000 --large", "a bigger one, with multi-megabyte logs"},
		{"convkit fixtures --layout dsh --to /tmp/sessions", "a sessions root in the runtime's own layout"},
	},
	"demo": {
		{"convkit demo", "the sample store in a new temporary directory, and the main jobs on it"},
		{"convkit demo --to /tmp/sample", "the same in /tmp/sample (with /tmp/sample-work and /tmp/sample-backups)"},
	},
}

// examplesText is the EXAMPLES section of a help ("" without examples).
func examplesText(path string) string {
	var b strings.Builder
	for i, x := range commandExamples[path] {
		if i == 0 {
			b.WriteString("\nEXAMPLES:\n")
		} else {
			b.WriteString("\n")
		}
		fmt.Fprintf(&b, "   # %s\n   %s\n", x.note, x.line)
	}
	return b.String()
}
