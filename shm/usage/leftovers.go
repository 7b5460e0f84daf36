package usage

import "time"

// Leftovers: the files of a volume that a dead run left: held by no live process of the
// pod (not in held) and last changed before cutoff (the end of the dead run: what the new
// run or a live container made after it is never touched). A file changed at cutoff
// itself is kept. In the order of files; nil when none.
func Leftovers(files []File, held map[FileID]bool, cutoff time.Time) []File {
	var left []File
	for _, f := range files {
		if !held[f.ID] && f.ChangedAt.Before(cutoff) {
			left = append(left, f)
		}
	}
	return left
}
