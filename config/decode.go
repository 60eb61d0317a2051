package config

// Why the YAML is decoded here and not with viper.
//
// ovnbgp walks the gopkg.in/yaml.v3 node tree against the Config struct
// itself instead of using viper's UnmarshalExact (gobgp's way). Viper
// lowercases every key and mapstructure then matches field names without
// regard to case, so `ASN:` would be accepted silently; its unknown-key and
// type errors carry no line, and its weak typing turns "1" into true. Walking
// the node tree gives, in one pass and for every problem at once: exact-case
// keys, the key path and line of each unknown key or bad value, and which
// keys were present at all (so defaults are filled in before decoding and an
// explicit 0, such as holdTime: 0 or listenPort: 0, is kept and validated).

import (
	"context"
	"encoding"
	"fmt"
	"math"
	"net/netip"
	"reflect"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// defaulter is implemented by the structs that have defaults; the decoder
// calls it on every new list element before decoding into it.
type defaulter interface {
	setDefaults()
}

// maxDecodeWork bounds the work of decoding one document: every value
// decoded and every key looked at counts one, each time an alias (*a) or a
// merge key (<<) brings it in again. A document written out by hand stays
// far below it (a thousand peers cost about 30,000); a YAML alias bomb,
// whose nested merge lists expand exponentially, reaches it in well under
// a second and is refused instead of taking minutes and gigabytes.
const maxDecodeWork = 1_000_000

// problemCost is the work a recorded problem counts (see fail).
const problemCost = 100

// aliasBombFormat is the message when a document exceeds maxDecodeWork.
const aliasBombFormat = "the document expands to more than %d values through anchors (&), aliases (*) and merge keys (<<): " +
	"refused as a YAML alias bomb; write the values out, or nest fewer merges"

// decoder turns a yaml.Node tree into a typed value, collecting problems.
type decoder struct {
	report
	ctx context.Context
	// work counts values decoded and keys looked at (see maxDecodeWork);
	// stopped is set once the budget is spent or ctx is done, and every
	// step then returns at once.
	work    int
	stopped bool
	// fields caches yamlFields per struct type.
	fields map[reflect.Type][]yamlField
	// lines maps every key path present in the document to its line.
	lines map[string]int
	// failed holds the paths that could not be decoded; later checks do not
	// report them again (a bad asn is not also a missing asn).
	failed map[string]bool
}

func newDecoder(ctx context.Context) *decoder {
	return &decoder{ctx: ctx, lines: map[string]int{}, failed: map[string]bool{}, fields: map[reflect.Type][]yamlField{}}
}

// spend counts n units of work and reports whether decoding may go on.
// Past the budget, or once ctx is done, it replaces every problem found so
// far (an alias bomb repeats them many times over) with one that says why
// decoding stopped.
func (d *decoder) spend(n int) bool {
	if d.stopped {
		return false
	}
	d.work += n
	msg := ""
	switch {
	case d.work > maxDecodeWork:
		msg = fmt.Sprintf(aliasBombFormat, maxDecodeWork)
	case d.work&0xfff < n: // every 4096 units or so
		if err := d.ctx.Err(); err != nil {
			msg = fmt.Sprintf("decoding stopped: %v", err)
		}
	}
	if msg == "" {
		return true
	}
	d.stopped = true
	d.errs = Errors{{Msg: msg}}
	return false
}

// fieldsOf is yamlFields(t), computed once per type.
func (d *decoder) fieldsOf(t reflect.Type) []yamlField {
	fs, ok := d.fields[t]
	if !ok {
		fs = yamlFields(t)
		d.fields[t] = fs
	}
	return fs
}

// fail records a problem with the value at path.
func (d *decoder) fail(path string, n *yaml.Node, format string, args ...any) {
	// A problem costs more than a value (a message, a map entry, a sort
	// later): an alias bomb of bad values reaches the budget sooner.
	if !d.spend(problemCost) {
		return
	}
	d.at(path, n.Line, format, args...)
	d.failed[path] = true
}

var (
	durationType = reflect.TypeFor[time.Duration]()
	addrType     = reflect.TypeFor[netip.Addr]()
	prefixType   = reflect.TypeFor[netip.Prefix]()
)

// decode stores n into v. A null value (`key:` or `key: ~`) leaves v as it
// is, that is at its default.
func (d *decoder) decode(n *yaml.Node, v reflect.Value, path string) {
	if !d.spend(1) {
		return
	}
	for n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	if n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null" {
		return
	}
	switch v.Type() {
	case durationType:
		d.duration(n, v, path)
		return
	case addrType:
		d.addr(n, v, path)
		return
	case prefixType:
		d.prefix(n, v, path)
		return
	}
	if v.CanAddr() {
		if u, ok := v.Addr().Interface().(encoding.TextUnmarshaler); ok {
			d.text(n, u, path)
			return
		}
	}
	switch v.Kind() {
	case reflect.Struct:
		d.mapping(n, v, path)
	case reflect.Slice:
		d.list(n, v, path)
	case reflect.String:
		if d.scalar(n, path) {
			v.SetString(n.Value)
		}
	case reflect.Bool:
		d.bool(n, v, path)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		d.integer(n, v, path)
	default:
		d.fail(path, n, "internal error: cannot decode into %s", v.Type())
	}
}

// yamlField is a struct field and its YAML key.
type yamlField struct {
	key   string
	index int
}

// yamlFields lists the fields of struct type t that have a YAML key, in
// declaration order.
func yamlFields(t reflect.Type) []yamlField {
	var fs []yamlField
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if !f.IsExported() || name == "" || name == "-" {
			continue
		}
		fs = append(fs, yamlField{key: name, index: i})
	}
	return fs
}

// mapping decodes a YAML mapping into struct v, key by exact key.
func (d *decoder) mapping(n *yaml.Node, v reflect.Value, path string) {
	if n.Kind != yaml.MappingNode {
		d.fail(path, n, "expected a mapping (key: value), got %s", describe(n))
		return
	}
	if !d.spend(1 + len(n.Content)/2) {
		return
	}
	fields := d.fieldsOf(v.Type())
	// Merge keys (<<: *anchor) first, so that the mapping's own keys win
	// whatever their order.
	for i := 0; i+1 < len(n.Content); i += 2 {
		if k, val := n.Content[i], n.Content[i+1]; k.ShortTag() == "!!merge" {
			d.merge(val, v, path)
		}
	}
	seen := map[string]int{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, val := n.Content[i], n.Content[i+1]
		if k.ShortTag() == "!!merge" {
			continue
		}
		if k.Kind != yaml.ScalarNode {
			d.fail(path, k, "a key must be a plain word, got %s", describe(k))
			continue
		}
		p := key(path, k.Value)
		if first, dup := seen[k.Value]; dup {
			d.fail(p, k, "duplicate key (first given on line %d)", first)
			continue
		}
		seen[k.Value] = k.Line
		d.lines[p] = k.Line
		f, ok := findField(fields, k.Value)
		if !ok {
			d.unknownKey(p, k, path, fields)
			continue
		}
		d.decode(val, v.Field(f.index), p)
	}
}

// merge decodes the value of a merge key: a mapping or a list of mappings.
func (d *decoder) merge(n *yaml.Node, v reflect.Value, path string) {
	for n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	if n.Kind == yaml.SequenceNode {
		for _, m := range n.Content {
			for m.Kind == yaml.AliasNode {
				m = m.Alias
			}
			d.mapping(m, v, path)
		}
		return
	}
	d.mapping(n, v, path)
}

func findField(fields []yamlField, key string) (yamlField, bool) {
	for _, f := range fields {
		if f.key == key {
			return f, true
		}
	}
	return yamlField{}, false
}

// unknownKey reports a key that is not in the contract, naming the right
// spelling when the key differs only by case or is a near miss.
func (d *decoder) unknownKey(p string, k *yaml.Node, parent string, fields []yamlField) {
	// The suggestion costs an edit distance per field: charged up front.
	if !d.spend(problemCost + len(fields)*len(k.Value)) {
		return
	}
	for _, f := range fields {
		if strings.EqualFold(f.key, k.Value) {
			d.fail(p, k, "unknown key: keys are case-sensitive, write %q", f.key)
			d.failed[key(parent, f.key)] = true
			return
		}
	}
	if s, ok := suggest(k.Value, fields); ok {
		d.fail(p, k, "unknown key (did you mean %q?)", s)
		d.failed[key(parent, s)] = true
		return
	}
	keys := make([]string, len(fields))
	for i, f := range fields {
		keys[i] = f.key
	}
	d.fail(p, k, "unknown key (valid keys here: %s)", strings.Join(keys, ", "))
}

// suggest finds the field key closest to a misspelt key: by edit distance,
// or as the completion of a truncated key ("password" → "passwordFile").
func suggest(typo string, fields []yamlField) (string, bool) {
	t := strings.ToLower(typo)
	best, bestScore := "", math.MaxInt
	for _, f := range fields {
		c := strings.ToLower(f.key)
		score := editDistance(t, c)
		for n := len(t) - 1; n <= len(t)+1; n++ {
			if n > 0 && n < len(c) {
				score = min(score, editDistance(t, c[:n])+1)
			}
		}
		if score < bestScore {
			best, bestScore = f.key, score
		}
	}
	return best, bestScore <= max(1, len(typo)/3)
}

// editDistance is the Levenshtein distance between a and b (bytes).
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// list decodes a YAML sequence into slice v.
func (d *decoder) list(n *yaml.Node, v reflect.Value, path string) {
	if n.Kind != yaml.SequenceNode {
		if n.Kind == yaml.ScalarNode {
			d.fail(path, n, "expected a list, got a single value: write [%s]", n.Value)
			return
		}
		d.fail(path, n, "expected a list, got %s", describe(n))
		return
	}
	if len(n.Content) == 0 {
		v.SetZero() // [] is nil, like an absent key
		return
	}
	s := reflect.MakeSlice(v.Type(), len(n.Content), len(n.Content))
	for i, e := range n.Content {
		p := index(path, i)
		d.lines[p] = e.Line
		el := s.Index(i)
		if def, ok := el.Addr().Interface().(defaulter); ok {
			def.setDefaults()
		}
		d.decode(e, el, p)
	}
	v.Set(s)
}

// text decodes a scalar through the type's own parser (communities,
// globs), which names what is wrong.
func (d *decoder) text(n *yaml.Node, u encoding.TextUnmarshaler, path string) {
	if !d.scalar(n, path) {
		return
	}
	if err := u.UnmarshalText([]byte(n.Value)); err != nil {
		d.fail(path, n, "%v", err)
	}
}

// scalar checks that n is a single value.
func (d *decoder) scalar(n *yaml.Node, path string) bool {
	if n.Kind != yaml.ScalarNode {
		d.fail(path, n, "expected a single value, got %s", describe(n))
		return false
	}
	return true
}

func (d *decoder) bool(n *yaml.Node, v reflect.Value, path string) {
	if !d.scalar(n, path) {
		return
	}
	var b bool
	if n.ShortTag() != "!!bool" || n.Decode(&b) != nil {
		d.fail(path, n, "%q is not a boolean (true or false)", n.Value)
		return
	}
	v.SetBool(b)
}

func (d *decoder) integer(n *yaml.Node, v reflect.Value, path string) {
	if !d.scalar(n, path) {
		return
	}
	var i int64
	switch tag := n.ShortTag(); {
	case tag == "!!int" && n.Decode(&i) == nil:
	case tag == "!!int":
		d.fail(path, n, "%s is out of range", n.Value)
		return
	case tag == "!!float":
		d.fail(path, n, "%s is not a whole number", n.Value)
		return
	case tag == "!!str" && isInteger(n.Value):
		d.fail(path, n, "%q is a string, expected a number: remove the quotes", n.Value)
		return
	default:
		d.fail(path, n, "%q is not a number", n.Value)
		return
	}
	bits := v.Type().Bits()
	if v.CanUint() {
		if i < 0 || (bits < 64 && uint64(i) >= 1<<bits) {
			d.fail(path, n, "%d is out of range (0..%d)", i, uint64(1)<<bits-1)
			return
		}
		v.SetUint(uint64(i))
		return
	}
	if bits < 64 && (i < -(1<<(bits-1)) || i >= 1<<(bits-1)) {
		d.fail(path, n, "%d is out of range (%d..%d)", i, -(1 << (bits - 1)), 1<<(bits-1)-1)
		return
	}
	v.SetInt(i)
}

// isInteger reports whether s is a decimal integer.
func isInteger(s string) bool {
	_, err := strconv.ParseInt(s, 10, 64)
	return err == nil
}

// duration accepts Go duration syntax ("90s", "1m30s", "300ms") and a bare 0.
func (d *decoder) duration(n *yaml.Node, v reflect.Value, path string) {
	if !d.scalar(n, path) {
		return
	}
	switch n.ShortTag() {
	case "!!int", "!!float":
		if f, err := strconv.ParseFloat(n.Value, 64); err == nil && f == 0 {
			v.SetInt(0)
			return
		}
		d.fail(path, n, "%s has no unit: write e.g. \"%ss\" (Go duration syntax)", n.Value, n.Value)
		return
	}
	t, err := time.ParseDuration(n.Value)
	if err != nil {
		d.fail(path, n, "%q is not a duration (use Go syntax, e.g. \"90s\", \"1m30s\", \"300ms\")", n.Value)
		return
	}
	v.SetInt(int64(t))
}

// addr accepts an IPv4 or IPv6 address; "" leaves it unset.
func (d *decoder) addr(n *yaml.Node, v reflect.Value, path string) {
	if !d.scalar(n, path) || n.Value == "" {
		return
	}
	a, err := netip.ParseAddr(n.Value)
	switch {
	case err != nil:
		d.fail(path, n, "%q is not an IP address", n.Value)
	case a.Is4In6():
		d.fail(path, n, "%q is an IPv4-mapped IPv6 address: write %s", n.Value, a.Unmap())
	default:
		v.Set(reflect.ValueOf(a))
	}
}

// prefix accepts a CIDR prefix without host bits; "" leaves it unset.
func (d *decoder) prefix(n *yaml.Node, v reflect.Value, path string) {
	if !d.scalar(n, path) || n.Value == "" {
		return
	}
	p, err := netip.ParsePrefix(n.Value)
	switch {
	case err != nil:
		d.fail(path, n, "%q is not a prefix (write ADDRESS/LENGTH, e.g. 192.0.2.0/24)", n.Value)
	case p != p.Masked():
		d.fail(path, n, "%q has host bits set (did you mean %s?)", n.Value, p.Masked())
	default:
		v.Set(reflect.ValueOf(p))
	}
}

// describe names the kind of a node for error messages.
func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		return fmt.Sprintf("the value %q", n.Value)
	default:
		return "something else"
	}
}
