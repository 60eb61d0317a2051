package config

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
	"unicode/utf8"
)

// Glob is a compiled name pattern, as written in advertise[].networks,
// namespaces and services. Its syntax is shell-like but, unlike
// path.Match, it has no separator: every OVN network name can be matched,
// including the names OVN-Kubernetes builds with "/" or ".".
//
//	pattern  matches
//	*        any run of characters, including none, "/" and "."
//	?        exactly one character
//	[abc]    one of the listed characters; [a-z] a range; [!a-z] or [^a-z]
//	         any character but those
//	\x       the character x itself (write \* for a literal star)
//
// Anything else matches itself; the whole name must match. A Glob is parsed
// once, when the configuration is loaded, and is safe for concurrent use.
type Glob struct {
	pattern string
	re      *regexp.Regexp
}

// ParseGlob compiles a pattern; see Glob for the syntax.
func ParseGlob(pattern string) (Glob, error) {
	if pattern == "" {
		return Glob{}, errors.New("empty pattern (write \"*\" for every name)")
	}
	var b strings.Builder
	b.WriteString(`(?s)^`)
	for i := 0; i < len(pattern); {
		r, n := utf8.DecodeRuneInString(pattern[i:])
		if r == utf8.RuneError && n == 1 {
			return Glob{}, fmt.Errorf("%q is not a valid glob: not UTF-8", pattern)
		}
		i += n
		switch r {
		case '*':
			b.WriteString(`.*`)
		case '?':
			b.WriteString(`.`)
		case '\\':
			if i >= len(pattern) {
				return Glob{}, fmt.Errorf("%q is not a valid glob: it ends with a lone \\ (write \\\\ for a backslash)", pattern)
			}
			e, m := utf8.DecodeRuneInString(pattern[i:])
			i += m
			writeRune(&b, e)
		case '[':
			end, err := globClass(&b, pattern, i)
			if err != nil {
				return Glob{}, fmt.Errorf("%q is not a valid glob: %w", pattern, err)
			}
			i = end
		default:
			writeRune(&b, r)
		}
	}
	b.WriteString(`$`)
	re, err := regexp.Compile(b.String())
	if err != nil {
		return Glob{}, fmt.Errorf("%q: %w", pattern, err)
	}
	return Glob{pattern: pattern, re: re}, nil
}

// globClass translates the character class starting at pattern[i] (just
// after its "[") and returns the index after its "]".
func globClass(b *strings.Builder, pattern string, i int) (int, error) {
	b.WriteByte('[')
	if i < len(pattern) && (pattern[i] == '!' || pattern[i] == '^') {
		b.WriteByte('^')
		i++
	}
	items := 0
	for {
		if i >= len(pattern) {
			return 0, errors.New("a [ character class is not closed with ]")
		}
		lo, n := utf8.DecodeRuneInString(pattern[i:])
		i += n
		if lo == ']' {
			if items == 0 {
				return 0, errors.New("empty character class []")
			}
			b.WriteByte(']')
			return i, nil
		}
		if lo == '\\' {
			if i >= len(pattern) {
				return 0, errors.New("a [ character class is not closed with ]")
			}
			lo, n = utf8.DecodeRuneInString(pattern[i:])
			i += n
		}
		hi := lo
		if i+1 < len(pattern) && pattern[i] == '-' && pattern[i+1] != ']' {
			i++
			hi, n = utf8.DecodeRuneInString(pattern[i:])
			i += n
			if hi == '\\' && i < len(pattern) {
				hi, n = utf8.DecodeRuneInString(pattern[i:])
				i += n
			}
			if hi < lo {
				return 0, fmt.Errorf("range %c-%c is backwards", lo, hi)
			}
		}
		fmt.Fprintf(b, `\x{%x}-\x{%x}`, lo, hi)
		items++
	}
}

func writeRune(b *strings.Builder, r rune) {
	b.WriteString(regexp.QuoteMeta(string(r)))
}

// Match reports whether name matches the whole pattern. The zero Glob
// matches nothing.
func (g Glob) Match(name string) bool {
	return g.re != nil && g.re.MatchString(name)
}

// String is the pattern as written.
func (g Glob) String() string { return g.pattern }

// Equal reports whether both globs have the same pattern (go-cmp uses it).
func (g Glob) Equal(o Glob) bool { return g.pattern == o.pattern }

// MarshalText writes the pattern.
func (g Glob) MarshalText() ([]byte, error) { return []byte(g.pattern), nil }

// UnmarshalText compiles a pattern (ParseGlob).
func (g *Glob) UnmarshalText(b []byte) error {
	v, err := ParseGlob(string(b))
	if err != nil {
		return err
	}
	*g = v
	return nil
}

// MatchAny reports whether name matches one of globs.
func MatchAny(globs []Glob, name string) bool {
	for _, g := range globs {
		if g.Match(name) {
			return true
		}
	}
	return false
}
