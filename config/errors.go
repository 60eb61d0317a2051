package config

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// FieldError is one problem in a configuration: the key path it concerns
// ("bgp.peers[1].address"), the line of the file when known, and what is
// wrong.
type FieldError struct {
	// File is the configuration file's name, "" when unknown.
	File string
	// Line is the 1-based line in File, 0 when unknown.
	Line int
	// Path is the key path, e.g. "bgp.peers[1].address"; "" for the whole
	// document.
	Path string
	// Msg says what is wrong, in lower case.
	Msg string
}

// Error formats the problem as "file:line: path: msg", leaving out the parts
// that are unknown.
func (e FieldError) Error() string {
	var b strings.Builder
	switch {
	case e.File != "" && e.Line > 0:
		fmt.Fprintf(&b, "%s:%d: ", e.File, e.Line)
	case e.File != "":
		fmt.Fprintf(&b, "%s: ", e.File)
	case e.Line > 0:
		fmt.Fprintf(&b, "line %d: ", e.Line)
	}
	if e.Path != "" {
		b.WriteString(e.Path)
		b.WriteString(": ")
	}
	b.WriteString(e.Msg)
	return b.String()
}

// Errors is every problem found in a configuration. Load, Parse and Validate
// return it (as error) when there is at least one; use errors.As to get it.
type Errors []FieldError

// Error lists every problem on its own line, sorted by line then path.
func (es Errors) Error() string {
	sorted := slices.Clone(es)
	sorted.sort()
	lines := make([]string, len(sorted))
	for i, e := range sorted {
		lines[i] = e.Error()
	}
	return strings.Join(lines, "\n")
}

// sort orders problems by line, then by path with list indexes compared as
// numbers (peers[2] before peers[10]).
func (es Errors) sort() {
	slices.SortStableFunc(es, func(a, b FieldError) int {
		if a.Line != b.Line {
			return a.Line - b.Line
		}
		return comparePaths(a.Path, b.Path)
	})
}

// comparePaths compares key paths, runs of digits by their numeric value.
func comparePaths(a, b string) int {
	for a != "" && b != "" {
		da, db := digitRun(a), digitRun(b)
		if da > 0 && db > 0 {
			na, _ := strconv.Atoi(a[:da])
			nb, _ := strconv.Atoi(b[:db])
			if na != nb {
				return na - nb
			}
			a, b = a[da:], b[db:]
			continue
		}
		if a[0] != b[0] {
			return int(a[0]) - int(b[0])
		}
		a, b = a[1:], b[1:]
	}
	return len(a) - len(b)
}

// digitRun is the number of leading ASCII digits of s.
func digitRun(s string) int {
	n := 0
	for n < len(s) && s[n] >= '0' && s[n] <= '9' {
		n++
	}
	return n
}

// report collects problems with their paths.
type report struct {
	errs Errors
}

// add records a problem at path.
func (r *report) add(path, format string, args ...any) {
	r.errs = append(r.errs, FieldError{Path: path, Msg: fmt.Sprintf(format, args...)})
}

// at records a problem at path on a known line.
func (r *report) at(path string, line int, format string, args ...any) {
	r.errs = append(r.errs, FieldError{Path: path, Line: line, Msg: fmt.Sprintf(format, args...)})
}

// key joins a parent path and a key.
func key(parent, name string) string {
	if parent == "" {
		return name
	}
	return parent + "." + name
}

// index joins a list path and an index.
func index(parent string, i int) string {
	return fmt.Sprintf("%s[%d]", parent, i)
}

// parentPath strips the last key or index of path: "a.b[2]" → "a.b" → "a" → "".
func parentPath(path string) string {
	i := strings.LastIndexAny(path, ".[")
	if i < 0 {
		return ""
	}
	return path[:i]
}

// under reports whether path is p itself or inside it.
func under(path, p string) bool {
	if p == "" || path == p {
		return true
	}
	return strings.HasPrefix(path, p) && (path[len(p)] == '.' || path[len(p)] == '[')
}
